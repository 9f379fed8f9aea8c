/* The capsule side of DLPack for the NumPy test: a PyCapsule around a managed tensor, with
 * a destructor written in C. A destructor written as a ctypes Python callback runs Python
 * code while the consumer may have an exception pending (NumPy raises when it rejects a
 * dtype), destroys that exception and leaks the tensor; this one only calls the deleter of
 * a capsule nobody consumed, and keeps any pending exception as it was.
 *
 * No Python.h is needed: the few C API functions used are declared here and resolved from
 * the interpreter that loads this library. */
#include "polytensor.h"

typedef struct _object PyObject;
typedef void (*PyCapsule_Destructor)(PyObject*);
extern PyObject* PyCapsule_New(void* pointer, const char* name, PyCapsule_Destructor destructor);
extern int PyCapsule_IsValid(PyObject* capsule, const char* name);
extern void* PyCapsule_GetPointer(PyObject* capsule, const char* name);
extern int PyCapsule_SetName(PyObject* capsule, const char* name);
extern void PyErr_Fetch(PyObject** type, PyObject** value, PyObject** traceback);
extern void PyErr_Restore(PyObject* type, PyObject* value, PyObject* traceback);

static const char VERSIONED[] = "dltensor_versioned";
static const char LEGACY[] = "dltensor";
static const char USED_VERSIONED[] = "used_dltensor_versioned";
static const char USED_LEGACY[] = "used_dltensor";

static void delete_unconsumed_versioned(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, VERSIONED)) return; /* consumed: renamed "used_..." */
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  DLManagedTensorVersioned* managed = PyCapsule_GetPointer(capsule, VERSIONED);
  if (managed != NULL && managed->deleter != NULL) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}

static void delete_unconsumed_legacy(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, LEGACY)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  DLManagedTensor* managed = PyCapsule_GetPointer(capsule, LEGACY);
  if (managed != NULL && managed->deleter != NULL) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}

/* A capsule carrying `managed` (a DLManagedTensorVersioned* if `versioned`, else a
 * DLManagedTensor*), as `__dlpack__` returns. */
PyObject* pt_capsule(void* managed, int versioned) {
  return versioned ? PyCapsule_New(managed, VERSIONED, delete_unconsumed_versioned)
                   : PyCapsule_New(managed, LEGACY, delete_unconsumed_legacy);
}

/* Consume a capsule as a DLPack consumer does: its managed tensor (versioned or legacy,
 * said in `*versioned`), with the capsule renamed so that its destructor leaves it alone.
 * NULL if it is neither (or already consumed). */
void* pt_capsule_take(PyObject* capsule, int* versioned) {
  const char* names[2] = {VERSIONED, LEGACY};
  const char* used[2] = {USED_VERSIONED, USED_LEGACY};
  for (int i = 0; i < 2; i++) {
    if (PyCapsule_IsValid(capsule, names[i])) {
      void* managed = PyCapsule_GetPointer(capsule, names[i]);
      PyCapsule_SetName(capsule, used[i]);
      *versioned = i == 0;
      return managed;
    }
  }
  return 0;
}
