/* A C consumer of polytensor's graphs and sessions, through polytensor.h only:
 * 1. the seed's `a + b` built with the operation builder and run (prints 7);
 * 2. a GraphDef TensorFlow wrote (argv[1]) imported under a prefix, its placeholder fed
 *    with the 3x4 values of argv[2..14], and `y:0` printed one value a line, for the Rust
 *    test to compare with what TensorFlow computed; then a traced run, its steps read back;
 * 3. a loop that never ends (the GraphDef $POLYTENSOR_FOREVER_GRAPH names), stopped by a
 *    deadline and by a cancellation manager;
 * 4. the SavedModel $POLYTENSOR_SAVED_MODEL loaded with PT_LoadSessionFromSavedModel, its
 *    signatures listed, and `serving_default` run on the 2x16 values of
 *    $POLYTENSOR_SAVED_MODEL_FEED, its output printed one value a line;
 * 5. mixed precision in bf16 switched on and off;
 * 6. PT_AddGradients: d(x * x + c)/dx at x = 3 (6), weighted by 0.5 (3); an unrelated
 *    placeholder gets no gradient; an op with none between is an error naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "polytensor.h"
#include "check.h"


/* A scalar float `Const` named `name`. */
static PT_Operation* constant(PT_Graph* g, const char* name, float value, PT_Status* s) {
  PT_Tensor* t = PT_AllocateTensor(PT_FLOAT, NULL, 0, sizeof(float), s);
  OK(s);
  memcpy(PT_TensorData(t), &value, sizeof value);
  PT_OperationDescription* d = PT_NewOperation(g, "Const", name);
  PT_SetAttrType(d, "dtype", PT_FLOAT);
  PT_SetAttrTensor(d, "value", t, s);
  OK(s);
  PT_Operation* op = PT_FinishOperation(d, s);
  OK(s);
  PT_DeleteTensor(t);
  return op;
}

static void seed_add(PT_Status* s) {
  PT_Graph* g = PT_NewGraph();
  PT_Operation* a = constant(g, "a", 3.0f, s);
  PT_Operation* b = constant(g, "b", 4.0f, s);
  PT_OperationDescription* d = PT_NewOperation(g, "AddV2", "total");
  PT_Output ia = {a, 0}, ib = {b, 0};
  PT_AddInput(d, ia);
  PT_AddInput(d, ib);
  PT_Operation* total = PT_FinishOperation(d, s);
  OK(s);
  CHECK(strcmp(PT_OperationOpType(total), "AddV2") == 0);
  CHECK(PT_OperationNumOutputs(total) == 1);
  PT_Output out = {total, 0};
  CHECK(PT_OperationOutputType(out) == PT_FLOAT);
  CHECK(PT_GraphGetTensorNumDims(g, out, s) == 0);
  OK(s);
  CHECK(PT_GraphOperationByName(g, "total") == total);
  CHECK(PT_GraphOperationByName(g, "nothing") == NULL);
  PT_SessionOptions* options = PT_NewSessionOptions();
  PT_SessionOptionsAddDevice(options, "cpu:0", s);
  OK(s);
  PT_Session* session = PT_NewSession(g, options, s);
  OK(s);
  PT_DeleteSessionOptions(options);
  /* The graph may go before the session: the session keeps what it needs. */
  PT_Tensor* value = NULL;
  PT_SessionRun(session, NULL, NULL, 0, &out, &value, 1, NULL, 0, s);
  OK(s);
  if (value != NULL) {
    printf("%g\n", *(const float*)PT_TensorData(value));
    CHECK(*(const float*)PT_TensorData(value) == 7.0f);
  }
  PT_DeleteTensor(value);
  /* A bad input is a status, not a crash. */
  PT_Output bad = {total, 5};
  PT_SessionRun(session, NULL, NULL, 0, &bad, &value, 1, NULL, 0, s);
  CHECK(PT_GetCode(s) == PT_INVALID_ARGUMENT && value == NULL);
  /* A bad input to the builder is reported when the operation is finished. */
  PT_OperationDescription* broken = PT_NewOperation(g, "AddV2", "broken");
  PT_Output nothing = {NULL, 0};
  PT_AddInput(broken, nothing);
  PT_AddInput(broken, ib);
  CHECK(PT_FinishOperation(broken, s) == NULL && PT_GetCode(s) == PT_INVALID_ARGUMENT);
  CHECK(strstr(PT_Message(s), "PT_Output.oper is NULL") != NULL);
  /* As TensorFlow's: a name already taken is refused, not renamed; an operation of another
   * graph is refused as an input; an import prefix that makes invalid names is refused. */
  PT_OperationDescription* again = PT_NewOperation(g, "AddV2", "total");
  PT_AddInput(again, ia);
  PT_AddInput(again, ib);
  CHECK(PT_FinishOperation(again, s) == NULL && PT_GetCode(s) == PT_INVALID_ARGUMENT);
  CHECK(strstr(PT_Message(s), "Duplicate node name in graph: 'total'") != NULL);
  PT_Graph* other = PT_NewGraph();
  PT_OperationDescription* foreign = PT_NewOperation(other, "Identity", "foreign");
  PT_AddInput(foreign, ia);
  CHECK(PT_FinishOperation(foreign, s) == NULL && PT_GetCode(s) == PT_INVALID_ARGUMENT);
  CHECK(strstr(PT_Message(s), "'a' belongs to another graph") != NULL);
  PT_Buffer* def = PT_GraphToGraphDef(g, s);
  OK(s);
  PT_ImportGraphDefOptions* bad_prefix = PT_NewImportGraphDefOptions();
  PT_ImportGraphDefOptionsSetPrefix(bad_prefix, "no spaces!", s);
  OK(s);
  PT_GraphImportGraphDef(other, PT_BufferData(def), PT_BufferLength(def), bad_prefix, s);
  CHECK(PT_GetCode(s) == PT_INVALID_ARGUMENT);
  CHECK(strstr(PT_Message(s), "Imported node name prefix 'no spaces!' would lead to invalid "
                              "node names") != NULL);
  CHECK(PT_GraphOperationByName(other, "no spaces!/a") == NULL);
  PT_DeleteImportGraphDefOptions(bad_prefix);
  PT_DeleteBuffer(def);
  PT_DeleteGraph(other);
  PT_CloseSession(session, s);
  OK(s);
  PT_SessionRun(session, NULL, NULL, 0, &out, &value, 1, NULL, 0, s);
  CHECK(PT_GetCode(s) != PT_OK);
  PT_DeleteSession(session, s);
  PT_DeleteGraph(g);
}

/* Mixed precision (PT_SessionOptionsSetBf16Weights): x [1, 2] = {1 + 2^-10, 1} fed, times
 * constant weights {1, 1}. In f32 that is 2 + 2^-10; with bf16 weights on a CPU with
 * AVX512-BF16, x is rounded to bf16 ({1, 1}) and the product is 2; elsewhere unchanged. */
static void bf16_weights(PT_Status* s) {
  PT_Graph* g = PT_NewGraph();
  PT_OperationDescription* d = PT_NewOperation(g, "Placeholder", "x");
  PT_SetAttrType(d, "dtype", PT_FLOAT);
  PT_Operation* x = PT_FinishOperation(d, s);
  OK(s);
  int64_t dims[2] = {2, 1};
  PT_Tensor* ones = PT_AllocateTensor(PT_FLOAT, dims, 2, 2 * sizeof(float), s);
  OK(s);
  float* w = (float*)PT_TensorData(ones);
  w[0] = w[1] = 1.0f;
  d = PT_NewOperation(g, "Const", "w");
  PT_SetAttrType(d, "dtype", PT_FLOAT);
  PT_SetAttrTensor(d, "value", ones, s);
  OK(s);
  PT_Operation* weights = PT_FinishOperation(d, s);
  OK(s);
  PT_DeleteTensor(ones);
  d = PT_NewOperation(g, "MatMul", "y");
  PT_Output ix = {x, 0}, iw = {weights, 0};
  PT_AddInput(d, ix);
  PT_AddInput(d, iw);
  PT_Operation* y = PT_FinishOperation(d, s);
  OK(s);
  int64_t x_dims[2] = {1, 2};
  PT_Tensor* feed = PT_AllocateTensor(PT_FLOAT, x_dims, 2, 2 * sizeof(float), s);
  OK(s);
  float* xs = (float*)PT_TensorData(feed);
  xs[0] = 1.0f + 1.0f / 1024.0f;
  xs[1] = 1.0f;
  int native = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  native = __builtin_cpu_supports("avx512bf16");
#endif
  for (int mixed = 0; mixed < 2; mixed++) {
    PT_SessionOptions* options = PT_NewSessionOptions();
    PT_SessionOptionsAddDevice(options, "cpu:0", s);
    OK(s);
    PT_SessionOptionsSetBf16Weights(options, mixed);
    PT_Session* session = PT_NewSession(g, options, s);
    OK(s);
    PT_DeleteSessionOptions(options);
    PT_Output out = {y, 0};
    PT_Tensor* value = NULL;
    const PT_Tensor* feeds[1] = {feed};
    PT_SessionRun(session, &ix, feeds, 1, &out, &value, 1, NULL, 0, s);
    OK(s);
    if (value != NULL) {
      float got = *(const float*)PT_TensorData(value);
      printf("bf16 weights %s: %.10g\n", mixed ? "on" : "off", got);
      CHECK(got == (mixed && native ? 2.0f : 2.0f + 1.0f / 1024.0f));
    }
    PT_DeleteTensor(value);
    PT_DeleteSession(session, s);
    OK(s);
  }
  PT_DeleteTensor(feed);
  PT_DeleteGraph(g);
}

/* The bytes of file `path` (free them), their count in `len`; NULL where it cannot be read. */
static char* read_file(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  CHECK(f != NULL);
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char* bytes = malloc(*len);
  CHECK(fread(bytes, 1, *len, f) == *len);
  fclose(f);
  return bytes;
}

static void imported(const char* path, char** values, PT_Status* s) {
  size_t len = 0;
  char* bytes = read_file(path, &len);
  if (bytes == NULL) return;
  PT_Graph* g = PT_NewGraph();
  PT_ImportGraphDefOptions* options = PT_NewImportGraphDefOptions();
  PT_ImportGraphDefOptionsSetPrefix(options, "mlp", s);
  PT_GraphImportGraphDef(g, bytes, len, options, s);
  OK(s);
  PT_DeleteImportGraphDefOptions(options);
  free(bytes);
  PT_Operation* x = PT_GraphOperationByName(g, "mlp/x");
  PT_Operation* y = PT_GraphOperationByName(g, "mlp/y");
  CHECK(x != NULL && y != NULL);
  if (x == NULL || y == NULL) return;
  PT_Output xo = {x, 0}, yo = {y, 0};
  int rank = PT_GraphGetTensorNumDims(g, xo, s);
  OK(s);
  CHECK(rank == 2);
  int64_t shape[2];
  PT_GraphGetTensorShape(g, xo, shape, 2, s);
  OK(s);
  CHECK(shape[0] == -1 && shape[1] == 4);
  int64_t dims[2] = {3, 4};
  PT_Tensor* feed = PT_AllocateTensor(PT_FLOAT, dims, 2, 12 * sizeof(float), s);
  OK(s);
  float* data = PT_TensorData(feed);
  for (int i = 0; i < 12; i++) data[i] = strtof(values[i], NULL);
  PT_Session* session = PT_NewSession(g, NULL, s);
  OK(s);
  const PT_Tensor* fed[1] = {feed};
  PT_Tensor* result = NULL;
  PT_SessionRun(session, &xo, fed, 1, &yo, &result, 1, NULL, 0, s);
  OK(s);
  if (result != NULL) {
    CHECK(PT_NumDims(result) == 2 && PT_Dim(result, 0) == 3 && PT_Dim(result, 1) == 1);
    PT_Tensor* host = PT_TensorToDevice(result, "cpu:0", s);
    OK(s);
    const float* got = PT_TensorData(host);
    for (int i = 0; i < 3; i++) printf("y %.9g\n", got[i]);
    PT_DeleteTensor(host);
  }
  PT_DeleteTensor(result);
  /* A traced run: its steps, TensorFlow's RunMetadata proto, the summary and the trace. */
  PT_RunOptions* run = PT_NewRunOptions();
  PT_RunMetadata* metadata = PT_NewRunMetadata();
  PT_RunOptionsSetRunMetadata(run, metadata);
  CHECK(PT_RunMetadataNumSteps(metadata) == 0);
  PT_SessionRunWithOptions(session, run, &xo, fed, 1, &yo, &result, 1, NULL, 0, s);
  OK(s);
  PT_DeleteTensor(result);
  int steps = PT_RunMetadataNumSteps(metadata);
  CHECK(steps >= 2);
  PT_Buffer* proto = PT_RunMetadataToProto(metadata);
  CHECK(proto != NULL && PT_BufferLength(proto) > 0);
  PT_DeleteBuffer(proto);
  PT_Buffer* summary = PT_RunMetadataSummary(metadata, 5);
  CHECK(summary != NULL && PT_BufferLength(summary) > 0);
  CHECK(strncmp((const char*)PT_BufferData(summary), "1 run(s)", 8) == 0);
  printf("traced %d steps:\n%.*s", steps, (int)PT_BufferLength(summary),
         (const char*)PT_BufferData(summary));
  PT_DeleteBuffer(summary);
  PT_Buffer* chrome = PT_RunMetadataChromeTrace(metadata);
  CHECK(chrome != NULL && ((const char*)PT_BufferData(chrome))[0] == '{');
  PT_DeleteBuffer(chrome);
  PT_RunMetadataClear(metadata);
  CHECK(PT_RunMetadataNumSteps(metadata) == 0);
  PT_DeleteRunMetadata(metadata);
  /* The options keep their own reference: a run after the metadata is freed is fine. */
  PT_SessionRunWithOptions(session, run, &xo, fed, 1, &yo, &result, 1, NULL, 0, s);
  OK(s);
  PT_DeleteTensor(result);
  PT_DeleteRunOptions(run);
  PT_DeleteTensor(feed);
  PT_DeleteSession(session, s);
  PT_DeleteGraph(g);
}

/* A GraphDef whose loop `loop/Exit:0` never ends (`path`): its runs stop at the session's
 * deadline, at a run's own, or when their cancellation manager is cancelled, and the session
 * runs on. */
static void stops(const char* path, PT_Status* s) {
  size_t len = 0;
  char* bytes = read_file(path, &len);
  if (bytes == NULL) return;
  PT_Graph* g = PT_NewGraph();
  PT_GraphImportGraphDef(g, bytes, len, NULL, s);
  OK(s);
  free(bytes);
  PT_Output exit = {PT_GraphOperationByName(g, "loop/Exit"), 0};
  PT_Output start = {PT_GraphOperationByName(g, "start"), 0};
  CHECK(exit.oper != NULL && start.oper != NULL);
  PT_SessionOptions* options = PT_NewSessionOptions();
  PT_SessionOptionsSetOperationTimeout(options, 50);
  PT_Session* session = PT_NewSession(g, options, s);
  OK(s);
  PT_DeleteSessionOptions(options);
  PT_Tensor* value = NULL;
  PT_SessionRun(session, NULL, NULL, 0, &exit, &value, 1, NULL, 0, s);
  CHECK(PT_GetCode(s) == PT_DEADLINE_EXCEEDED && value == NULL);
  printf("stopped: %s\n", PT_Message(s));
  /* A run's own timeout replaces the session's; a cancelled manager stops it. */
  PT_RunOptions* run = PT_NewRunOptions();
  PT_RunOptionsSetTimeout(run, 20);
  PT_SessionRunWithOptions(session, run, NULL, NULL, 0, &exit, &value, 1, NULL, 0, s);
  CHECK(PT_GetCode(s) == PT_DEADLINE_EXCEEDED && value == NULL);
  PT_RunOptionsSetTimeout(run, 0);
  PT_CancellationManager* cancel = PT_NewCancellationManager();
  CHECK(PT_CancellationManagerIsCancelled(cancel) == 0);
  PT_CancellationManagerStartCancel(cancel);
  CHECK(PT_CancellationManagerIsCancelled(cancel) == 1);
  PT_RunOptionsSetCancellationManager(run, cancel);
  PT_DeleteCancellationManager(cancel);
  PT_SessionRunWithOptions(session, run, NULL, NULL, 0, &start, &value, 1, NULL, 0, s);
  CHECK(PT_GetCode(s) == PT_CANCELLED && value == NULL);
  printf("stopped: %s\n", PT_Message(s));
  PT_DeleteRunOptions(run);
  /* The session runs on. */
  PT_SessionRun(session, NULL, NULL, 0, &start, &value, 1, NULL, 0, s);
  OK(s);
  CHECK(value != NULL && *(const int32_t*)PT_TensorData(value) == 0);
  PT_DeleteTensor(value);
  PT_DeleteSession(session, s);
  PT_DeleteGraph(g);
}

/* A SavedModel through its signature's tensors: `x` fed, `output_0` fetched. */
static void saved_model(const char* dir, const char* feed_text, PT_Status* s) {
  PT_Graph* g = PT_NewGraph();
  const char* tags[1] = {"serve"};
  PT_Buffer* meta_graph = NULL;
  PT_Session* session = PT_LoadSessionFromSavedModel(NULL, dir, tags, 1, g, &meta_graph, s);
  OK(s);
  if (session == NULL) return;
  CHECK(meta_graph != NULL && PT_BufferLength(meta_graph) > 0);
  PT_DeleteBuffer(meta_graph);
  for (int i = 0; i < PT_SessionNumSignatures(session); i++) {
    printf("signature %s\n", PT_SessionSignatureKey(session, i));
  }
  CHECK(PT_SessionSignatureNumTensors(session, "serving_default", 0, s) == 1);
  CHECK(strcmp(PT_SessionSignatureTensorKey(session, "serving_default", 0, 0, s), "x") == 0);
  PT_Output x = PT_SessionSignatureTensor(session, "serving_default", 0, "x", s);
  OK(s);
  PT_Output y = PT_SessionSignatureTensor(session, "serving_default", 1, "output_0", s);
  OK(s);
  PT_SessionSignatureTensor(session, "nothing", 1, "output_0", s);
  CHECK(PT_GetCode(s) == PT_NOT_FOUND);
  float values[32];
  const char* at = feed_text;
  for (int i = 0; i < 32; i++) values[i] = strtof(at, (char**)&at);
  int64_t dims[2] = {2, 16};
  PT_Tensor* feed = PT_AllocateTensor(PT_FLOAT, dims, 2, sizeof values, s);
  OK(s);
  memcpy(PT_TensorData(feed), values, sizeof values);
  const PT_Tensor* fed[1] = {feed};
  PT_Tensor* result = NULL;
  PT_SessionRun(session, &x, fed, 1, &y, &result, 1, NULL, 0, s);
  OK(s);
  if (result != NULL) {
    PT_Tensor* host = PT_TensorToDevice(result, "cpu:0", s);
    OK(s);
    const float* got = PT_TensorData(host);
    for (int i = 0; i < 8; i++) printf("saved_model %.9g\n", got[i]);
    PT_DeleteTensor(host);
  }
  PT_DeleteTensor(result);
  PT_DeleteTensor(feed);
  PT_DeleteSession(session, s);
  /* The graph now holds the model: loading into it again is refused; a missing directory
   * is NOT_FOUND. */
  CHECK(PT_LoadSessionFromSavedModel(NULL, dir, tags, 1, g, NULL, s) == NULL);
  CHECK(PT_GetCode(s) == PT_INVALID_ARGUMENT);
  PT_DeleteGraph(g);
  PT_Graph* empty = PT_NewGraph();
  CHECK(PT_LoadSessionFromSavedModel(NULL, "/nonexistent/model", tags, 1, empty, NULL, s) == NULL);
  CHECK(PT_GetCode(s) == PT_NOT_FOUND);
  PT_DeleteGraph(empty);
}

/* Operation `type` named `name` of the `n` inputs `in`. */
static PT_Operation* apply(PT_Graph* g, const char* type, const char* name, const PT_Output* in,
                           int n, PT_Status* s) {
  PT_OperationDescription* d = PT_NewOperation(g, type, name);
  for (int i = 0; i < n; i++) PT_AddInput(d, in[i]);
  PT_Operation* op = PT_FinishOperation(d, s);
  OK(s);
  return op;
}

/* TensorFlow's TF_AddGradients, as PT_AddGradients. */
static void gradients(PT_Status* s) {
  PT_Graph* g = PT_NewGraph();
  PT_Operation* x = NULL;
  PT_Operation* unrelated = NULL;
  const char* names[2] = {"x", "unrelated"};
  PT_Operation** ops[2] = {&x, &unrelated};
  for (int i = 0; i < 2; i++) {
    PT_OperationDescription* d = PT_NewOperation(g, "Placeholder", names[i]);
    PT_SetAttrType(d, "dtype", PT_FLOAT);
    *ops[i] = PT_FinishOperation(d, s);
    OK(s);
  }
  PT_Operation* c = constant(g, "c", 1.0f, s);
  PT_Output ox = {x, 0}, oc = {c, 0}, ou = {unrelated, 0};
  PT_Operation* square = apply(g, "Mul", "square", (PT_Output[]){ox, ox}, 2, s);
  PT_Output oy = {apply(g, "AddV2", "y", (PT_Output[]){{square, 0}, oc}, 2, s), 0};
  PT_Output xs[2] = {ox, ou};
  PT_Output dy[2];
  PT_AddGradients(g, &oy, 1, xs, 2, NULL, s, dy);
  OK(s);
  CHECK(dy[0].oper != NULL && dy[1].oper == NULL);
  PT_Operation* half = constant(g, "half", 0.5f, s);
  PT_Output ohalf = {half, 0};
  PT_Output weighted;
  PT_AddGradients(g, &oy, 1, &ox, 1, &ohalf, s, &weighted);
  OK(s);
  PT_Session* session = PT_NewSession(g, NULL, s);
  OK(s);
  PT_Tensor* three = PT_AllocateTensor(PT_FLOAT, NULL, 0, sizeof(float), s);
  OK(s);
  *(float*)PT_TensorData(three) = 3.0f;
  PT_Output fetches[2] = {dy[0], weighted};
  PT_Tensor* values[2] = {NULL, NULL};
  const PT_Tensor* feeds[1] = {three};
  PT_SessionRun(session, &ox, feeds, 1, fetches, values, 2, NULL, 0, s);
  OK(s);
  if (values[0] != NULL && values[1] != NULL) {
    CHECK(*(const float*)PT_TensorData(values[0]) == 6.0f);
    CHECK(*(const float*)PT_TensorData(values[1]) == 3.0f);
  }
  PT_DeleteTensor(values[0]);
  PT_DeleteTensor(values[1]);
  PT_DeleteTensor(three);
  /* Floor has no gradient (none flows through it, as TensorFlow's); Prod has none
   * defined: an error naming it, dy untouched. */
  PT_Output ofloor = {apply(g, "Floor", "floor", &ox, 1, s), 0};
  PT_Output through_floor = {x, 7};
  PT_AddGradients(g, &ofloor, 1, &ox, 1, NULL, s, &through_floor);
  OK(s);
  CHECK(through_floor.oper == NULL);
  PT_Tensor* no_axes = PT_AllocateTensor(PT_INT32, (const int64_t[]){0}, 1, 0, s);
  OK(s);
  PT_OperationDescription* d = PT_NewOperation(g, "Const", "no_axes");
  PT_SetAttrType(d, "dtype", PT_INT32);
  PT_SetAttrTensor(d, "value", no_axes, s);
  OK(s);
  PT_Operation* axes = PT_FinishOperation(d, s);
  OK(s);
  PT_DeleteTensor(no_axes);
  PT_Output oprod = {apply(g, "Prod", "prod", (PT_Output[]){ox, {axes, 0}}, 2, s), 0};
  PT_Output untouched = {x, 7};
  PT_AddGradients(g, &oprod, 1, &ox, 1, NULL, s, &untouched);
  CHECK(PT_GetCode(s) == PT_INVALID_ARGUMENT);
  CHECK(strstr(PT_Message(s), "No gradient defined for operation 'prod' (op type: Prod)") != NULL);
  CHECK(untouched.oper == x && untouched.index == 7);
  PT_DeleteSession(session, s);
  PT_DeleteGraph(g);
}

int main(int argc, char** argv) {
  PT_Status* s = PT_NewStatus();
  CHECK(PT_DataTypeSize(PT_FLOAT) == 4 && PT_DataTypeSize(PT_COMPLEX128) == 16);
  CHECK(PT_DataTypeSize(7) == 0); /* strings have no fixed size */
  CHECK(strlen(PT_Version()) > 0);
  seed_add(s);
  bf16_weights(s);
  gradients(s);
  if (argc >= 14) imported(argv[1], argv + 2, s);
  const char* forever = getenv("POLYTENSOR_FOREVER_GRAPH");
  if (forever != NULL) stops(forever, s);
  const char* model = getenv("POLYTENSOR_SAVED_MODEL");
  const char* model_feed = getenv("POLYTENSOR_SAVED_MODEL_FEED");
  if (model != NULL && model_feed != NULL) saved_model(model, model_feed, s);
  PT_DeleteStatus(s);
  if (failures == 0) printf("all checks passed\n");
  return failures == 0 ? 0 : 1;
}
