// Prometheus metrics of the server (spec §6). Being written; see src/server/metrics.cc.
#pragma once
