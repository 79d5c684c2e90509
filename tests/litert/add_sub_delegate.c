/*
 * A LiteRT external delegate for offload's tests, in the spirit of the dummy delegate of
 * LiteRT's custom-delegate guide: it claims float32 ADD and SUB nodes with two inputs of one
 * shape and no fused activation, and runs them itself.
 *
 * It is built by the test suite with the system C compiler, without TensorFlow or LiteRT
 * headers: the few structs LiteRT hands a delegate are declared below, field for field, from
 * the public C API (tflite/core/c/common.h). That header promises to append fields only, so
 * a declaration that stops early is a valid prefix, and the two structs this library hands
 * to LiteRT (the delegate, and a registration passed by value) carry zeroed room for fields
 * a newer LiteRT may read.
 *
 * Counters (exported, read by the tests through ctypes): how often LiteRT called the
 * delegate's Prepare, how many nodes it claimed, how often its kernels ran; and the life of
 * delegate instances: how many tflite_plugin_create_delegate made and
 * tflite_plugin_destroy_delegate destroyed, and how many options it parsed, so that a test
 * sees whether one instance is made per load and shared. One option, "claim" (below); any
 * other is refused through LiteRT's error callback, as an external delegate should.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int offload_test_prepare_calls = 0;
int offload_test_claimed_nodes = 0;
int offload_test_invoke_calls = 0;
int offload_test_delegates_created = 0;
int offload_test_delegates_destroyed = 0;
int offload_test_options_parsed = 0;

/* -- the slice of LiteRT's C API a delegate needs ------------------------------------- */

enum { STATUS_OK = 0, STATUS_ERROR = 1 };
enum { TYPE_FLOAT32 = 1 };
enum { OP_ADD = 0, OP_SUB = 41, OP_DELEGATE = 51 };
enum { ACTIVATION_NONE = 0 };

typedef struct IntArray {
  int size;
  int data[];
} IntArray;

typedef struct Tensor {
  int type;
  void *data;
  IntArray *dims;
  float scale; /* legacy quantization parameters */
  int32_t zero_point;
  int allocation_type;
  size_t bytes;
  const void *allocation;
  const char *name;
  void *delegate;
  int buffer_handle;
  bool data_is_stale;
  bool is_variable;
  int quantization_type;
  void *quantization_params;
  void *sparsity;
  const IntArray *dims_signature;
} Tensor;

typedef struct Node {
  IntArray *inputs;
  IntArray *outputs;
  IntArray *intermediates;
  IntArray *temporaries;
  void *user_data;
  void *builtin_data; /* for ADD and SUB: the fused activation is its first int */
  const void *custom_initial_data;
  int custom_initial_data_size;
  void *delegate;
  bool might_have_side_effect;
} Node;

struct Context;
struct Delegate;

typedef struct Registration {
  void *(*init)(struct Context *context, const char *buffer, size_t length);
  void (*free)(struct Context *context, void *buffer);
  int (*prepare)(struct Context *context, Node *node);
  int (*invoke)(struct Context *context, Node *node);
  const char *(*profiling_string)(const struct Context *context, const Node *node);
  int32_t builtin_code;
  const char *custom_name;
  int version;
  void *registration_external;
  void *(*async_kernel)(struct Context *context, Node *node);
  uint64_t inplace_operator;
  unsigned char reserved[64];
} Registration;

typedef struct Context {
  size_t tensors_size;
  int (*GetExecutionPlan)(struct Context *context, IntArray **plan);
  Tensor *tensors;
  void *impl;
  int (*ResizeTensor)(struct Context *context, Tensor *tensor, IntArray *new_size);
  void (*ReportError)(struct Context *context, const char *format, ...);
  int (*AddTensors)(struct Context *context, int count, int *first);
  int (*GetNodeAndRegistration)(struct Context *context, int node, Node **out_node,
                                Registration **out_registration);
  int (*ReplaceNodeSubsetsWithDelegateKernels)(struct Context *context,
                                               Registration registration,
                                               const IntArray *nodes,
                                               struct Delegate *delegate);
} Context;

typedef struct Delegate {
  void *data;
  int (*Prepare)(Context *context, struct Delegate *delegate);
  void *CopyFromBufferHandle;
  void *CopyToBufferHandle;
  void *FreeBufferHandle;
  int64_t flags;
  void *opaque_delegate_builder;
  unsigned char reserved[64];
} Delegate;

typedef struct DelegateParams {
  Delegate *delegate;
  IntArray *nodes_to_replace;
  IntArray *input_tensors;
  IntArray *output_tensors;
} DelegateParams;

/* -- which nodes it takes ------------------------------------------------------------- */

/* "claim": "add_sub" (default), "none" (Prepare runs and takes nothing) or "fail" (Prepare
   reports an error, so LiteRT refuses the model). */
typedef enum { CLAIM_ADD_SUB, CLAIM_NONE, CLAIM_FAIL } Claim;

typedef struct Options {
  Claim claim;
} Options;

static bool same_dims(const IntArray *a, const IntArray *b) {
  if (a == NULL || b == NULL || a->size != b->size) return false;
  for (int i = 0; i < a->size; ++i) {
    if (a->data[i] != b->data[i]) return false;
  }
  return true;
}

static bool claimable(const Context *context, const Node *node, const Registration *reg) {
  if (reg->custom_name != NULL) return false;
  if (reg->builtin_code != OP_ADD && reg->builtin_code != OP_SUB) return false;
  if (node->inputs->size != 2 || node->outputs->size != 1) return false;
  if (node->builtin_data != NULL && *(const int *)node->builtin_data != ACTIVATION_NONE) {
    return false;
  }
  int tensors[3] = {node->inputs->data[0], node->inputs->data[1], node->outputs->data[0]};
  for (int i = 0; i < 3; ++i) {
    if (tensors[i] < 0 || (size_t)tensors[i] >= context->tensors_size) return false;
    if (context->tensors[tensors[i]].type != TYPE_FLOAT32) return false;
  }
  return same_dims(context->tensors[tensors[0]].dims, context->tensors[tensors[1]].dims);
}

/* -- the kernel that runs a claimed subset -------------------------------------------- */

typedef struct Step {
  int op;
  int a, b, out;
} Step;

typedef struct Kernel {
  int count;
  Step *steps;
  /* Per tensor: scratch for values that stay inside the subset (LiteRT does not allocate
     them once their nodes are replaced), with their element counts. */
  size_t tensors;
  float **scratch;
  size_t *elements;
  bool *internal;
} Kernel;

static bool contains(const IntArray *array, int value) {
  for (int i = 0; i < array->size; ++i) {
    if (array->data[i] == value) return true;
  }
  return false;
}

static size_t element_count(const IntArray *dims) {
  size_t n = 1;
  for (int i = 0; i < dims->size; ++i) n *= (size_t)dims->data[i];
  return n;
}

static void kernel_free(Context *context, void *buffer) {
  (void)context;
  Kernel *kernel = buffer;
  if (kernel == NULL) return;
  for (size_t t = 0; t < kernel->tensors; ++t) free(kernel->scratch[t]);
  free(kernel->scratch);
  free(kernel->elements);
  free(kernel->internal);
  free(kernel->steps);
  free(kernel);
}

static void *kernel_init(Context *context, const char *buffer, size_t length) {
  (void)length;
  const DelegateParams *params = (const DelegateParams *)buffer;
  Kernel *kernel = calloc(1, sizeof(Kernel));
  if (kernel == NULL) return NULL;
  kernel->count = params->nodes_to_replace->size;
  kernel->tensors = context->tensors_size;
  kernel->steps = calloc((size_t)kernel->count, sizeof(Step));
  kernel->scratch = calloc(kernel->tensors, sizeof(float *));
  kernel->elements = calloc(kernel->tensors, sizeof(size_t));
  kernel->internal = calloc(kernel->tensors, sizeof(bool));
  if (!kernel->steps || !kernel->scratch || !kernel->elements || !kernel->internal) {
    kernel_free(context, kernel);
    return NULL;
  }
  for (int i = 0; i < kernel->count; ++i) {
    Node *node;
    Registration *reg;
    if (context->GetNodeAndRegistration(context, params->nodes_to_replace->data[i], &node,
                                        &reg) != STATUS_OK) {
      kernel_free(context, kernel);
      return NULL;
    }
    Step *step = &kernel->steps[i];
    step->op = reg->builtin_code;
    step->a = node->inputs->data[0];
    step->b = node->inputs->data[1];
    step->out = node->outputs->data[0];
    kernel->internal[step->out] = !contains(params->output_tensors, step->out);
  }
  return kernel;
}

static int kernel_prepare(Context *context, Node *node) {
  Kernel *kernel = node->user_data;
  for (int i = 0; i < kernel->count; ++i) {
    const Step *step = &kernel->steps[i];
    const Tensor *a = &context->tensors[step->a];
    size_t n = kernel->internal[step->a] ? kernel->elements[step->a] : element_count(a->dims);
    kernel->elements[step->out] = n;
    if (kernel->internal[step->out]) {
      free(kernel->scratch[step->out]);
      kernel->scratch[step->out] = malloc((n ? n : 1) * sizeof(float));
      if (kernel->scratch[step->out] == NULL) return STATUS_ERROR;
      continue;
    }
    Tensor *out = &context->tensors[step->out];
    if (!kernel->internal[step->a] && !same_dims(out->dims, a->dims)) {
      /* LiteRT takes ownership of the new dims and frees them with free(). */
      IntArray *dims = malloc(sizeof(IntArray) + (size_t)a->dims->size * sizeof(int));
      if (dims == NULL) return STATUS_ERROR;
      dims->size = a->dims->size;
      memcpy(dims->data, a->dims->data, (size_t)a->dims->size * sizeof(int));
      if (context->ResizeTensor(context, out, dims) != STATUS_OK) return STATUS_ERROR;
    }
  }
  return STATUS_OK;
}

static float *values(Context *context, const Kernel *kernel, int tensor) {
  return kernel->internal[tensor] ? kernel->scratch[tensor] : context->tensors[tensor].data;
}

static int kernel_invoke(Context *context, Node *node) {
  Kernel *kernel = node->user_data;
  ++offload_test_invoke_calls;
  for (int i = 0; i < kernel->count; ++i) {
    const Step *step = &kernel->steps[i];
    const float *a = values(context, kernel, step->a);
    const float *b = values(context, kernel, step->b);
    float *out = values(context, kernel, step->out);
    size_t n = kernel->elements[step->out];
    if (n && (a == NULL || b == NULL || out == NULL)) return STATUS_ERROR;
    if (step->op == OP_ADD) {
      for (size_t k = 0; k < n; ++k) out[k] = a[k] + b[k];
    } else {
      for (size_t k = 0; k < n; ++k) out[k] = a[k] - b[k];
    }
  }
  return STATUS_OK;
}

/* -- the delegate --------------------------------------------------------------------- */

static int delegate_prepare(Context *context, Delegate *delegate) {
  ++offload_test_prepare_calls;
  const Options *options = delegate->data;
  if (options->claim == CLAIM_FAIL) {
    context->ReportError(context, "offload_test_add_sub: failing on request (claim: fail)");
    return STATUS_ERROR;
  }
  if (options->claim == CLAIM_NONE) return STATUS_OK;
  IntArray *plan;
  if (context->GetExecutionPlan(context, &plan) != STATUS_OK) return STATUS_ERROR;
  IntArray *taken = malloc(sizeof(IntArray) + (size_t)(plan->size + 1) * sizeof(int));
  if (taken == NULL) return STATUS_ERROR;
  taken->size = 0;
  for (int i = 0; i < plan->size; ++i) {
    Node *node;
    Registration *reg;
    if (context->GetNodeAndRegistration(context, plan->data[i], &node, &reg) != STATUS_OK) {
      free(taken);
      return STATUS_ERROR;
    }
    if (claimable(context, node, reg)) taken->data[taken->size++] = plan->data[i];
  }
  int status = STATUS_OK;
  if (taken->size > 0) {
    offload_test_claimed_nodes += taken->size;
    Registration kernel;
    memset(&kernel, 0, sizeof(kernel));
    kernel.init = kernel_init;
    kernel.free = kernel_free;
    kernel.prepare = kernel_prepare;
    kernel.invoke = kernel_invoke;
    kernel.builtin_code = OP_DELEGATE;
    kernel.custom_name = "offload_test_add_sub";
    kernel.version = 1;
    status = context->ReplaceNodeSubsetsWithDelegateKernels(context, kernel, taken, delegate);
  }
  free(taken);
  return status;
}

/* LiteRT's external-delegate entry points (load_delegate, --external_delegate_path). The
   option count is an int: ai_edge_litert's load_delegate passes a C int. */
Delegate *tflite_plugin_create_delegate(char **keys, char **values_, int count,
                                        void (*report_error)(const char *)) {
  Options *options = calloc(1, sizeof(Options));
  if (options == NULL) return NULL;
  options->claim = CLAIM_ADD_SUB;
  for (int i = 0; i < count; ++i) {
    char message[256];
    ++offload_test_options_parsed;
    if (strcmp(keys[i], "claim") != 0) {
      snprintf(message, sizeof(message),
               "offload_test_add_sub: unknown option '%s' (options: claim)", keys[i]);
      if (report_error != NULL) report_error(message);
      free(options);
      return NULL;
    }
    if (strcmp(values_[i], "add_sub") == 0) {
      options->claim = CLAIM_ADD_SUB;
      continue;
    }
    if (strcmp(values_[i], "none") == 0) {
      options->claim = CLAIM_NONE;
      continue;
    }
    if (strcmp(values_[i], "fail") == 0) {
      options->claim = CLAIM_FAIL;
      continue;
    }
    snprintf(message, sizeof(message),
             "offload_test_add_sub: option claim: expected 'add_sub', 'none' or 'fail', "
             "found '%s'",
             values_[i]);
    if (report_error != NULL) report_error(message);
    free(options);
    return NULL;
  }
  Delegate *delegate = calloc(1, sizeof(Delegate));
  if (delegate == NULL) {
    free(options);
    return NULL;
  }
  delegate->data = options;
  delegate->Prepare = delegate_prepare;
  ++offload_test_delegates_created;
  return delegate;
}

void tflite_plugin_destroy_delegate(Delegate *delegate) {
  if (delegate == NULL) return;
  ++offload_test_delegates_destroyed;
  free(delegate->data);
  free(delegate);
}
