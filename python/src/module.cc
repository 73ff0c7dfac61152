// vellum._C: the compiled half of the Python package (python/vellum/ is the other half).
#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "Vellum's C++ engine (public API of include/vellum/); use the `vellum` package.";
  vellum::python::bind_errors(m);
  vellum::python::bind_config(m);
  vellum::python::bind_sampling(m);
  vellum::python::bind_outputs(m);
  vellum::python::bind_engine(m);
}
