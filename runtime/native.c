/* pynox._native: the module that toplevel.c, image.c, binding.c, immortal.c,
 * zygote.c and audit_gate.c fill (see native.h).
 *
 * One module rather than one per file: each extension module a run loads is another
 * shared object to map and relocate before the program starts. */
#include "native.h"

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "pynox._native", NULL, 0, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void);

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddFunctions(module, pynox_toplevel_methods) != 0
        || PyModule_AddFunctions(module, pynox_image_methods) != 0
        || PyModule_AddFunctions(module, pynox_binding_methods) != 0
        || PyModule_AddFunctions(module, pynox_immortal_methods) != 0
        || PyModule_AddFunctions(module, pynox_zygote_methods) != 0
        || PyModule_AddFunctions(module, pynox_audit_gate_methods) != 0
        || pynox_zygote_add_constants(module) != 0
        || pynox_binding_add_constants(module) != 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
