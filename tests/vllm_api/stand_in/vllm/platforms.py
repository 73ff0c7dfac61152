# SPDX-License-Identifier: Apache-2.0
"""current_platform: a CPU."""


class _CpuPlatform:
    device_type = "cpu"

    def is_cpu(self):
        return True

    def __getattr__(self, name):
        if name.startswith("is_") or name.startswith("supports_"):
            return lambda *args, **kwargs: False
        if name == "device_count":
            return lambda: 0
        raise AttributeError(name)


current_platform = _CpuPlatform()
