/* A C consumer of polytensor that uses only polytensor.h: tensors over its own memory,
 * ops, errors, TensorProto, and DLPack both ways, with every deleter counted. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "polytensor.h"
#include "check.h"

_Static_assert(sizeof(DLTensor) == 48, "DLTensor is 48 bytes");
_Static_assert(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned is 80 bytes");
_Static_assert(offsetof(DLManagedTensor, deleter) == 56, "the legacy deleter is at 56");
_Static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "dl_tensor is at 32");


static int deallocated = 0;
static void count_deallocation(void* data, size_t len, void* arg) {
  (void)data;
  (void)len;
  *(int*)arg += 1;
}

/* A producer's managed tensor: the struct, its shape and strides, and its memory. */
typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[2];
  int64_t strides[2];
  double values[6];
} Produced;
static int produced_deleted = 0;
static void delete_produced(DLManagedTensorVersioned* self) {
  produced_deleted += 1;
  (void)self; /* static storage: nothing to free */
}

int main(void) {
  PT_Status* status = PT_NewStatus();

  /* Devices. */
  PT_DeviceList* devices = PT_ListDevices(status);
  OK(status);
  CHECK(PT_DeviceListCount(devices) >= 1);
  CHECK(strncmp(PT_DeviceListName(devices, 0, status), "", 1) != 0);
  CHECK(PT_DeviceListName(devices, 999, status) == NULL);
  CHECK(PT_GetCode(status) == PT_INVALID_ARGUMENT);
  PT_DeleteDeviceList(devices);

  /* A tensor over our memory, with a deallocator. */
  static float a_values[6] = {1, 2, 3, 4, 5, 6};
  int64_t dims[2] = {2, 3};
  PT_Tensor* a = PT_NewTensor(PT_FLOAT, dims, 2, a_values, sizeof a_values,
                              count_deallocation, &deallocated, status);
  OK(status);
  CHECK(PT_TensorType(a) == PT_FLOAT);
  CHECK(PT_NumDims(a) == 2 && PT_Dim(a, 0) == 2 && PT_Dim(a, 1) == 3);
  CHECK(PT_TensorByteSize(a) == 24 && PT_TensorElementCount(a) == 6);
  CHECK(PT_TensorData(a) == (void*)a_values); /* no copy */
  CHECK(strncmp(PT_TensorDevice(a), "cpu:", 4) == 0);

  /* Ops. */
  int64_t one = 1;
  static float b_values[1] = {10};
  PT_Tensor* b = PT_NewTensor(PT_FLOAT, &one, 1, b_values, sizeof b_values, NULL, NULL, status);
  OK(status);
  PT_Tensor* sum = PT_Binary("add", a, b, status);
  OK(status);
  float out[6];
  PT_TensorCopyTo(sum, out, sizeof out, status);
  OK(status);
  for (int i = 0; i < 6; i++) CHECK(out[i] == a_values[i] + 10);
  PT_Tensor* gram = PT_MatMul(a, a, 0, 1, status); /* a @ a^T: [2, 2] */
  OK(status);
  float g[4];
  PT_TensorCopyTo(gram, g, sizeof g, status);
  OK(status);
  CHECK(g[0] == 14 && g[1] == 32 && g[2] == 32 && g[3] == 77);
  int64_t axis = -1;
  PT_Tensor* rows = PT_Reduce("sum", a, &axis, 1, 0, status);
  OK(status);
  CHECK(PT_NumDims(rows) == 1 && PT_Dim(rows, 0) == 2);
  PT_Tensor* roots = PT_Unary("sqrt", a, status);
  OK(status);
  PT_TensorCopyTo(roots, out, sizeof out, status);
  CHECK(fabsf(out[3] - 2.0f) < 1e-6f);
  PT_Tensor* ints = PT_Cast(a, PT_INT32, status);
  OK(status);
  CHECK(PT_TensorType(ints) == PT_INT32);

  /* Errors are statuses, never crashes. */
  CHECK(PT_Binary("add", a, gram, status) == NULL); /* [2,3] + [2,2] */
  CHECK(PT_GetCode(status) == PT_INVALID_ARGUMENT);
  CHECK(strstr(PT_Message(status), "shape") != NULL);
  CHECK(PT_Unary("no_such_op", a, status) == NULL);
  CHECK(PT_GetCode(status) == PT_INVALID_ARGUMENT);
  CHECK(PT_Unary("neg", NULL, status) == NULL);
  CHECK(PT_GetCode(status) == PT_INVALID_ARGUMENT);
  static float wrong[5];
  int wrong_freed = 0;
  CHECK(PT_NewTensor(PT_FLOAT, dims, 2, wrong, sizeof wrong, count_deallocation, &wrong_freed,
                     status) == NULL);
  CHECK(PT_GetCode(status) == PT_INVALID_ARGUMENT);
  CHECK(wrong_freed == 1); /* ownership passed: handed back at once */
  CHECK(PT_DecodeTensorProto("\xff\xff", 2, status) == NULL);
  CHECK(PT_GetCode(status) == PT_INVALID_ARGUMENT);
  PT_TensorCopyTo(a, out, 3, status);
  CHECK(PT_GetCode(status) == PT_INVALID_ARGUMENT);

  /* TensorProto round trip. */
  PT_Buffer* proto = PT_EncodeTensorProto(sum, status);
  OK(status);
  PT_Tensor* decoded = PT_DecodeTensorProto(PT_BufferData(proto), PT_BufferLength(proto), status);
  OK(status);
  PT_TensorCopyTo(decoded, out, sizeof out, status);
  CHECK(out[5] == 16);
  CHECK(PT_TensorIsReadOnly(decoded) == 0);
  PT_DeleteBuffer(proto);

  /* Decoded tensors own writable memory wherever tensor_content lay in the message: a
   * version_number varint of 1 to 4 bytes moves the content through every offset mod 4. */
  for (int shift = 1; shift <= 4; shift++) {
    unsigned char msg[32];
    size_t n = 0;
    const unsigned char head[8] = {0x08, 0x01,                          /* dtype: DT_FLOAT */
                                   0x12, 0x04, 0x12, 0x02, 0x08, 0x02}; /* shape: [2] */
    memcpy(msg, head, sizeof head);
    n += sizeof head;
    msg[n++] = 0x18; /* version_number */
    for (int i = 1; i < shift; i++) msg[n++] = 0x80;
    msg[n++] = 0x01;
    msg[n++] = 0x22; /* tensor_content, 8 bytes */
    msg[n++] = 0x08;
    const float pair[2] = {1.0f, 2.0f};
    memcpy(msg + n, pair, sizeof pair);
    n += sizeof pair;
    PT_Tensor* content = PT_DecodeTensorProto(msg, n, status);
    OK(status);
    CHECK(PT_TensorIsReadOnly(content) == 0);
    float* data = PT_TensorData(content);
    CHECK(data != NULL && data[1] == 2.0f);
    if (data != NULL) data[0] = 5.0f;
    float read_back[2];
    PT_TensorCopyTo(content, read_back, sizeof read_back, status);
    OK(status);
    CHECK(read_back[0] == 5.0f && read_back[1] == 2.0f);
    PT_DeleteTensor(content);
  }

  /* ArgMax takes exactly one axis, as TensorFlow's does. */
  int64_t both_axes[2] = {0, 1};
  CHECK(PT_Reduce("argmax", a, both_axes, 2, 0, status) == NULL);
  CHECK(PT_GetCode(status) == PT_INVALID_ARGUMENT);
  CHECK(strstr(PT_Message(status), "exactly one axis") != NULL);
  PT_Tensor* argmax = PT_Reduce("argmax", a, &axis, 1, 0, status);
  OK(status);
  CHECK(PT_TensorType(argmax) == PT_INT64 && PT_Dim(argmax, 0) == 2);
  PT_DeleteTensor(argmax);

  /* DLPack export: our tensor to a consumer, sharing memory. */
  size_t live = PT_LiveDLPackExports();
  DLManagedTensorVersioned* exported = PT_ToDLPackVersioned(a, status);
  OK(status);
  CHECK(exported->version.major == 1);
  CHECK(exported->dl_tensor.device.device_type == DLDeviceType_CPU);
  CHECK(exported->dl_tensor.dtype.code == kDLFloat && exported->dl_tensor.dtype.bits == 32);
  CHECK(exported->dl_tensor.ndim == 2 && exported->dl_tensor.shape[1] == 3);
  CHECK(exported->dl_tensor.strides[0] == 3 && exported->dl_tensor.strides[1] == 1);
  CHECK((char*)exported->dl_tensor.data + exported->dl_tensor.byte_offset == (char*)a_values);
  CHECK(exported->flags == 0);
  CHECK(PT_LiveDLPackExports() == live + 1);
  static const int32_t constants[4] = {7, 8, 9, 10};
  int64_t four = 4;
  int constants_freed = 0;
  PT_Tensor* frozen = PT_NewConstTensor(PT_INT32, &four, 1, constants, sizeof constants,
                                        count_deallocation, &constants_freed, status);
  OK(status);
  CHECK(PT_TensorIsReadOnly(frozen) == 1);
  DLManagedTensorVersioned* read_only = PT_ToDLPackVersioned(frozen, status);
  OK(status);
  CHECK(read_only->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK(PT_ToDLPack(frozen, status) == NULL); /* legacy cannot say read-only */
  CHECK(strstr(PT_Message(status), "read-only") != NULL);
  read_only->deleter(read_only);
  PT_DeleteTensor(frozen);
  CHECK(constants_freed == 1);
  DLManagedTensor* legacy = PT_ToDLPack(a, status);
  OK(status);

  /* The exported memory outlives every handle: the deallocator waits for the deleters. */
  PT_DeleteTensor(a);
  CHECK(deallocated == 0);
  PT_Tensor* back = PT_FromDLPackVersioned(exported, status); /* polytensor consumes it */
  OK(status);
  CHECK(PT_TensorData(back) == (void*)a_values);
  legacy->deleter(legacy);
  CHECK(deallocated == 0);
  PT_DeleteTensor(back);
  CHECK(deallocated == 1); /* once, when the last view went */
  CHECK(PT_LiveDLPackExports() == live);

  /* DLPack import: a producer's transposed view, with a deleter. */
  static Produced p;
  for (int i = 0; i < 6; i++) p.values[i] = i;
  p.shape[0] = 3; p.shape[1] = 2;   /* the transpose of a [2, 3] row-major matrix */
  p.strides[0] = 1; p.strides[1] = 3;
  p.managed.version.major = 1;
  p.managed.version.minor = 1;
  p.managed.deleter = delete_produced;
  p.managed.dl_tensor.data = p.values;
  p.managed.dl_tensor.device.device_type = DLDeviceType_CPU;
  p.managed.dl_tensor.ndim = 2;
  p.managed.dl_tensor.dtype.code = kDLFloat;
  p.managed.dl_tensor.dtype.bits = 64;
  p.managed.dl_tensor.dtype.lanes = 1;
  p.managed.dl_tensor.shape = p.shape;
  p.managed.dl_tensor.strides = p.strides;
  PT_Tensor* imported = PT_FromDLPackVersioned(&p.managed, status);
  OK(status);
  double t[6];
  PT_TensorCopyTo(imported, t, sizeof t, status);
  OK(status);
  CHECK(t[0] == 0 && t[1] == 3 && t[2] == 1 && t[3] == 4 && t[4] == 2 && t[5] == 5);
  CHECK(produced_deleted == 0);
  PT_Tensor* moved = PT_Unary("neg", imported, status);
  PT_DeleteTensor(imported);
  CHECK(produced_deleted == 1);
  PT_DeleteTensor(moved);
  /* A refused import (lanes 2) still calls the deleter once. */
  p.managed.dl_tensor.dtype.lanes = 2;
  CHECK(PT_FromDLPackVersioned(&p.managed, status) == NULL);
  CHECK(PT_GetCode(status) == PT_INVALID_ARGUMENT);
  CHECK(produced_deleted == 2);

  /* The Python protocol: copy=True makes a private copy, flagged IS_COPIED. */
  int versioned = -1;
  DLManagedTensorVersioned* copy =
      PT_DLPack(sum, NULL, 1, 1, 0, 0, /*copy=*/1, &versioned, status);
  OK(status);
  CHECK(versioned == 1 && (copy->flags & DLPACK_FLAG_BITMASK_IS_COPIED));
  copy->deleter(copy);
  DLManagedTensor* old = PT_DLPack(sum, NULL, -1, 0, 0, 0, -1, &versioned, status);
  OK(status);
  CHECK(versioned == 0);
  old->deleter(old);
  int32_t type = 0, id = -1;
  PT_DLPackDevice(sum, &type, &id, status);
  OK(status);
  CHECK(type == DLDeviceType_CPU && id == 0);

  PT_DeleteTensor(b);
  PT_DeleteTensor(sum);
  PT_DeleteTensor(gram);
  PT_DeleteTensor(rows);
  PT_DeleteTensor(roots);
  PT_DeleteTensor(ints);
  PT_DeleteTensor(decoded);
  PT_DeleteStatus(status);
  CHECK(PT_LiveDLPackExports() == live);
  if (failures == 0) printf("C consumer: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
