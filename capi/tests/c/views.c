/* Views, string tensors and the rest of the operation builder, through polytensor.h only:
 * 1. a tensor reshaped (with -1), bitcast and viewed through strides of its own, sharing
 *    its buffer, with a view past the buffer refused;
 * 2. string tensors made from C strings (a NUL inside one) and read back;
 * 3. a graph built with a list input (AddN), a control input, string, shape, float and
 *    list attributes, and a fed placeholder, run with PT_SessionRun.
 * Prints "all checks passed" when every check holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "polytensor.h"
#include "check.h"

static void views(PT_Status* s) {
  int64_t dims[2] = {2, 3};
  PT_Tensor* t = PT_AllocateTensor(PT_FLOAT, dims, 2, 6 * sizeof(float), s);
  OK(s);
  float* data = (float*)PT_TensorData(t);
  for (int i = 0; i < 6; i++) data[i] = (float)i;

  int64_t flat_dims[2] = {-1, 2};
  PT_Tensor* r = PT_TensorReshape(t, flat_dims, 2, s);
  OK(s);
  CHECK(PT_NumDims(r) == 2 && PT_Dim(r, 0) == 3 && PT_Dim(r, 1) == 2);
  CHECK(PT_TensorData(r) == PT_TensorData(t)); /* the same buffer */
  int64_t wrong[1] = {4};
  CHECK(PT_TensorReshape(t, wrong, 1, s) == NULL && PT_GetCode(s) == PT_INVALID_ARGUMENT);

  PT_Tensor* bits = PT_TensorBitcast(t, PT_INT32, s);
  OK(s);
  CHECK(PT_TensorType(bits) == PT_INT32 && PT_Dim(bits, 1) == 3);
  int32_t one_bits;
  memcpy(&one_bits, &data[1], sizeof one_bits);
  CHECK(((const int32_t*)PT_TensorData(bits))[1] == one_bits);
  PT_Tensor* halves = PT_TensorBitcast(t, PT_HALF, s); /* a smaller dtype adds a dim */
  OK(s);
  CHECK(PT_NumDims(halves) == 3 && PT_Dim(halves, 2) == 2);

  /* The transpose, as strides: [3, 2] with strides [1, 3]. */
  int64_t t_dims[2] = {3, 2}, t_strides[2] = {1, 3};
  PT_Tensor* tr = PT_TensorStridedView(t, t_dims, t_strides, 2, 0, s);
  OK(s);
  CHECK(PT_TensorStride(tr, 0) == 1 && PT_TensorStride(tr, 1) == 3 && PT_TensorOffset(tr) == 0);
  CHECK(PT_TensorData(tr) == NULL); /* not contiguous: read it with a copy */
  float copied[6];
  PT_TensorCopyTo(tr, copied, sizeof copied, s);
  OK(s);
  CHECK(copied[0] == 0.0f && copied[1] == 3.0f && copied[2] == 1.0f && copied[5] == 5.0f);
  /* Row 1 alone: offset 3, and a column repeated by a zero stride. */
  int64_t row_dims[1] = {3}, row_strides[1] = {1};
  PT_Tensor* row = PT_TensorStridedView(t, row_dims, row_strides, 1, 3, s);
  OK(s);
  CHECK(PT_TensorOffset(row) == 3 && ((const float*)PT_TensorData(row))[0] == 3.0f);
  int64_t rep_dims[1] = {4}, rep_strides[1] = {0};
  PT_Tensor* rep = PT_TensorStridedView(t, rep_dims, rep_strides, 1, 5, s);
  OK(s);
  /* Past the buffer, or a negative offset: a status, not a read out of bounds. */
  CHECK(PT_TensorStridedView(t, row_dims, row_strides, 1, 4, s) == NULL);
  CHECK(PT_GetCode(s) == PT_INVALID_ARGUMENT);
  CHECK(PT_TensorStridedView(t, row_dims, row_strides, 1, -1, s) == NULL);
  CHECK(PT_GetCode(s) == PT_INVALID_ARGUMENT);
  PT_DeleteTensor(rep);
  PT_DeleteTensor(row);
  PT_DeleteTensor(tr);
  PT_DeleteTensor(halves);
  PT_DeleteTensor(bits);
  PT_DeleteTensor(r);
  PT_DeleteTensor(t);
}

static void strings(PT_Status* s) {
  const char* values[3] = {"polytensor", "", "a\0b"};
  size_t lengths[3] = {10, 0, 3};
  int64_t dims[1] = {3};
  PT_Tensor* t = PT_NewStringTensor(values, lengths, dims, 1, s);
  OK(s);
  CHECK(PT_TensorType(t) == PT_STRING && PT_TensorElementCount(t) == 3);
  size_t length = 99;
  const char* first = PT_TensorStringAt(t, 0, &length);
  CHECK(first != NULL && length == 10 && memcmp(first, "polytensor", 10) == 0);
  CHECK(PT_TensorStringAt(t, 1, &length) != NULL && length == 0);
  const char* third = PT_TensorStringAt(t, 2, &length);
  CHECK(third != NULL && length == 3 && memcmp(third, "a\0b", 3) == 0);
  CHECK(PT_TensorStringAt(t, 3, &length) == NULL && length == 0);
  /* A view of a string tensor reads its own elements: the last one, by stride. */
  int64_t one[1] = {1}, stride[1] = {1};
  PT_Tensor* last = PT_TensorStridedView(t, one, stride, 1, 2, s);
  OK(s);
  CHECK(PT_TensorStringAt(last, 0, &length) != NULL && length == 3);
  CHECK(PT_TensorStringAt(NULL, 0, &length) == NULL && length == 0);
  PT_DeleteTensor(last);
  PT_DeleteTensor(t);
}

static PT_Operation* finish(PT_OperationDescription* d, PT_Status* s) {
  PT_Operation* op = PT_FinishOperation(d, s);
  OK(s);
  return op;
}

static void builder(PT_Status* s) {
  PT_Graph* g = PT_NewGraph();
  /* x: a [2, ?] float placeholder. */
  PT_OperationDescription* d = PT_NewOperation(g, "Placeholder", "x");
  PT_SetAttrType(d, "dtype", PT_FLOAT);
  int64_t shape[2] = {2, -1};
  PT_SetAttrShape(d, "shape", shape, 2);
  PT_Operation* x = finish(d, s);
  int64_t got[2];
  PT_Output x0 = {x, 0};
  PT_GraphGetTensorShape(g, x0, got, 2, s);
  OK(s);
  CHECK(got[0] == 2 && got[1] == -1);
  /* y = AddN(x, x, x), after a NoOp `first` (a control input). */
  PT_Operation* first = finish(PT_NewOperation(g, "NoOp", "first"), s);
  d = PT_NewOperation(g, "AddN", "y");
  PT_Output three[3] = {x0, x0, x0};
  PT_AddInputList(d, three, 3);
  PT_AddControlInput(d, first);
  PT_Operation* y = finish(d, s);
  /* z = MirrorPad(y, [[0, 0], [1, 1]], mode "REFLECT"), then LeakyRelu(alpha 0.5) and a
   * Squeeze of nothing (squeeze_dims []) with IdentityN's type list checked. */
  int64_t pad_dims[2] = {2, 2};
  PT_Tensor* pads = PT_AllocateTensor(PT_INT32, pad_dims, 2, 4 * sizeof(int32_t), s);
  OK(s);
  int32_t pad_values[4] = {0, 0, 1, 1};
  memcpy(PT_TensorData(pads), pad_values, sizeof pad_values);
  d = PT_NewOperation(g, "Const", "pads");
  PT_SetAttrType(d, "dtype", PT_INT32);
  PT_SetAttrTensor(d, "value", pads, s);
  PT_Operation* pad_op = finish(d, s);
  d = PT_NewOperation(g, "MirrorPad", "z");
  PT_Output y0 = {y, 0}, p0 = {pad_op, 0};
  PT_AddInput(d, y0);
  PT_AddInput(d, p0);
  PT_SetAttrString(d, "mode", "REFLECT", 7);
  PT_Operation* z = finish(d, s);
  d = PT_NewOperation(g, "IdentityN", "both");
  PT_Output z0 = {z, 0};
  PT_AddInput(d, z0);
  PT_AddInput(d, y0);
  PT_DataType types[2] = {PT_FLOAT, PT_FLOAT};
  PT_SetAttrTypeList(d, "T", types, 2);
  PT_Operation* both = finish(d, s);
  d = PT_NewOperation(g, "Squeeze", "same");
  PT_Output both0 = {both, 0};
  PT_AddInput(d, both0);
  PT_SetAttrIntList(d, "squeeze_dims", NULL, 0);
  PT_Operation* same = finish(d, s);
  /* A type list that contradicts the inputs is refused when the operation is finished. */
  d = PT_NewOperation(g, "IdentityN", "wrong");
  PT_AddInput(d, z0);
  PT_DataType one_int[1] = {PT_INT32};
  PT_SetAttrTypeList(d, "T", one_int, 1);
  CHECK(PT_FinishOperation(d, s) == NULL && PT_GetCode(s) == PT_INVALID_ARGUMENT);
  /* A float attribute, as the GraphDef writes it: AttrValue.f (field 4, fixed32) = 0.25. */
  d = PT_NewOperation(g, "Placeholder", "with_float");
  PT_SetAttrType(d, "dtype", PT_FLOAT);
  PT_SetAttrFloat(d, "scale", 0.25f);
  finish(d, s);
  PT_Buffer* def = PT_GraphToGraphDef(g, s);
  OK(s);
  const unsigned char f025[5] = {0x25, 0x00, 0x00, 0x80, 0x3e};
  int found = 0;
  const unsigned char* bytes = (const unsigned char*)PT_BufferData(def);
  for (size_t i = 0; def != NULL && i + 5 <= PT_BufferLength(def); i++) {
    found |= memcmp(bytes + i, f025, 5) == 0;
  }
  CHECK(found);
  PT_DeleteBuffer(def);

  /* Run it: x = [[1, 2, 3], [4, 5, 6]] -> y = 3x -> z pads each row by reflection. */
  int64_t x_dims[2] = {2, 3};
  PT_Tensor* feed = PT_AllocateTensor(PT_FLOAT, x_dims, 2, 6 * sizeof(float), s);
  OK(s);
  float* xs = (float*)PT_TensorData(feed);
  for (int i = 0; i < 6; i++) xs[i] = (float)(i + 1);
  PT_Session* session = PT_NewSession(g, NULL, s);
  OK(s);
  PT_Output fetch[2] = {{same, 0}, {both, 1}};
  PT_Tensor* out[2] = {NULL, NULL};
  const PT_Tensor* const feeds[1] = {feed};
  PT_SessionRun(session, &x0, feeds, 1, fetch, out, 2, NULL, 0, s);
  OK(s);
  if (out[0] != NULL && out[1] != NULL) {
    CHECK(PT_Dim(out[0], 0) == 2 && PT_Dim(out[0], 1) == 5);
    float padded[10];
    PT_TensorCopyTo(out[0], padded, sizeof padded, s);
    OK(s);
    /* Row 0 of 3x is [3, 6, 9]; REFLECT pads it to [6, 3, 6, 9, 6]. */
    CHECK(padded[0] == 6.0f && padded[1] == 3.0f && padded[3] == 9.0f && padded[4] == 6.0f);
    float tripled[6];
    PT_TensorCopyTo(out[1], tripled, sizeof tripled, s);
    OK(s);
    CHECK(tripled[5] == 18.0f);
  }
  PT_DeleteTensor(out[0]);
  PT_DeleteTensor(out[1]);
  PT_DeleteTensor(feed);
  PT_DeleteTensor(pads);
  PT_DeleteSession(session, s);
  PT_DeleteGraph(g);
}

int main(void) {
  PT_Status* s = PT_NewStatus();
  views(s);
  strings(s);
  builder(s);
  PT_DeleteStatus(s);
  if (failures == 0) printf("all checks passed\n");
  return failures == 0 ? 0 : 1;
}
