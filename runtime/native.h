/* pynox._native: what a run calls in C, in one module (native.c), so that a run
 * loads one shared object for all of it. */
#ifndef PYNOX_NATIVE_H
#define PYNOX_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* toplevel.c: compiling and running a program as `python` runs a script. */
extern PyMethodDef pynox_toplevel_methods[];

/* immortal.c: what the pool server holds, made immortal before it forks. */
extern PyMethodDef pynox_immortal_methods[];

/* zygote.c: the pool zygote's loop, which forks spares. */
extern PyMethodDef pynox_zygote_methods[];
int pynox_zygote_add_constants(PyObject *module);

/* image.c: the start-up image, mapped, and the file system calls of a run's start. */
extern PyMethodDef pynox_image_methods[];

/* audit_gate.c: the audit hook that hands the access log only the events it watches. */
extern PyMethodDef pynox_audit_gate_methods[];

/* binding.c: the calls of the sandbox core that a run makes. */
extern PyMethodDef pynox_binding_methods[];
int pynox_binding_add_constants(PyObject *module);

#endif
