/*
 * vulkan.c — the vulkan backend's device hooks (device.c finds Vulkan and glslc).
 *
 * Memory is device-local buffers addressed by their device address (RtBuf is that address,
 * so the pipeline's offsets into its arena work as on CUDA); a table of every allocation
 * maps an address back to its VkBuffer for copies. Copies between host and device go
 * through host-visible staging buffers.
 *
 * Nothing is submitted until the pipeline waits (sync): every copy, dispatch and timestamp
 * is recorded into the program's open command buffer, each behind a full memory barrier,
 * the buffer ending with one too, and sync submits what is pending in one vkQueueSubmit
 * with one fence, waits, then copies the downloads out of their staging buffers. The
 * recorded schedule (record_begin/end) is a command buffer of its own, replayed by queueing
 * it behind what is pending: a run is one submission and one wait. It ends with a full
 * barrier, and its first dispatch records none: every command buffer before it in submission
 * order ended with one.
 *
 * A module is the SPIR-V of each kernel of the plan's GLSL, compiled apart (dialect_glsl.c
 * says why) when the plan is built; looking a kernel up makes its compute pipeline, whose
 * workgroup size is a specialization constant set from the launch (through the device's pipeline
 * cache, kept on disk: vk_pipes_open). A launch pushes the address of a table of
 * its buffers' addresses (host-visible memory, kept per kernel and reused while the
 * buffers are the same) and its grid, dispatched over x and y.
 */
#if __has_include(<vulkan/vulkan.h>)
#include "vk.h"

#include <stdlib.h>
#include <string.h>

/* One allocation: the buffer, its memory, its address and size; host-visible ones mapped. */
typedef struct VkAlloc { VkBuffer buf; VkDeviceMemory mem; RtBuf addr; int64_t size; void *map; } VkAlloc;
typedef struct VkDownload { void *dst; const void *src; size_t n; } VkDownload;

typedef struct VkProg {
  VkDev *v;
  VkCommandPool pool;
  VkCommandBuffer open;            /* recording, NULL when nothing is */
  bool open_used;                  /* open holds commands */
  VkCommandBuffer *pending; int n_pending, cap_pending;   /* to submit at the next sync, in order */
  VkCommandBuffer *spent; int n_spent, cap_spent;         /* submitted batches, idle after the wait */
  VkCommandBuffer *idle; int n_idle, cap_idle;            /* batches to begin again (reset by the pool) */
  VkCommandBuffer graph_cb;        /* the schedule being recorded (record_begin .. record_end) */
  VkFence fence;
  /* Timestamps (NULL without): slots 0 and 1 around a run, written by mark in batches of their
   * own; 2 and 3 written by a recorded schedule at its start and end (graph_stamps). A run that
   * was one replay and nothing else takes the schedule's pair: the batches put two command-
   * buffer boundaries around it that an untimed run does not pay (~8 us on the H200;
   * KILN_VULKAN_STAMPS=batch, the old way, for a race). Several replays (run_times) or uploads
   * in the run take the outer pair, which spans them all. */
  VkQueryPool stamps;
  bool graph_stamps, graph_span;
  int replays, others;             /* since mark(0): replays, and other commands recorded */
  bool barrier_recorded;           /* the schedule's first dispatch records no barrier (vk_record_begin) */
  VkAlloc *allocs; int n_alloc, cap_alloc;       /* device buffers, by address */
  VkAlloc *staging; int n_staging, cap_staging;  /* host-visible, in use until the next wait */
  VkAlloc *spare; int n_spare, cap_spare;        /* host-visible, free for the next copies */
  int64_t spare_bytes;
  VkDownload *downs; int n_down, cap_down;
  bool pipes_added;                /* pipelines made: the device's pipeline cache is saved at close */
} VkProg;

/* The plan's source and each kernel's SPIR-V (by kernel number; NULL: no such kernel). */
typedef struct VkModule { uint32_t **spv; size_t *bytes; int n_kernels; struct VkFn **fns; int n_fn, cap_fn; } VkModule;
typedef struct VkArgs { VkAlloc table; int n; } VkArgs;
typedef struct VkFn { VkShaderModule shader; VkPipeline pipe; VkArgs *args; int n_args, cap_args; } VkFn;

/* Grows *p (an array of *cap elements of size sz) to hold one more. */
static bool grow(void *p, int n, int *cap, size_t sz) {
  if (n < *cap) return true;
  int nc = *cap ? 2 * *cap : 16;
  void *q = kiln_realloc(*(void **)p, (size_t)nc * sz);
  if (!q) return false;
  *(void **)p = q, *cap = nc;
  return true;
}

static kiln_status vk_probe(void) {
  VkDev *v;
  return vk_device(&v);
}

/* A buffer in memory type `type`, mapped where `host` (the host writes or reads it). */
static kiln_status make_buffer(VkDev *v, int64_t bytes, uint32_t type, bool host, const char *what, VkAlloc *a) {
  memset(a, 0, sizeof *a);
  int64_t size = bytes < 256 ? 256 : bytes;
  if (!host && v->alloc_round > 1 && size <= INT64_MAX - v->alloc_round)  /* a race: whole large pages */
    size = (size + v->alloc_round - 1) / v->alloc_round * v->alloc_round;
  VkBufferCreateInfo bc = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = (VkDeviceSize)size,
                            .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                     VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
                            .sharingMode = VK_SHARING_MODE_EXCLUSIVE };
  kiln_status st = vk_check(v->vkCreateBuffer(v->device, &bc, NULL, &a->buf), "vkCreateBuffer", what);
  if (st) return st;
  VkMemoryRequirements mr;
  v->vkGetBufferMemoryRequirements(v->device, a->buf, &mr);
  if (!(mr.memoryTypeBits & (1u << type))) {
    v->vkDestroyBuffer(v->device, a->buf, NULL);
    return kiln_fail(KILN_ERR_DEVICE, "vulkan: %s: no memory type for a storage buffer", what);
  }
  VkMemoryAllocateFlagsInfo fl = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                   .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT };
  VkMemoryAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &fl, .allocationSize = mr.size,
                              .memoryTypeIndex = type };
  st = vk_check(v->vkAllocateMemory(v->device, &ai, NULL, &a->mem), "vkAllocateMemory", what);
  if (!st) st = vk_check(v->vkBindBufferMemory(v->device, a->buf, a->mem, 0), "vkBindBufferMemory", what);
  if (!st && host) st = vk_check(v->vkMapMemory(v->device, a->mem, 0, VK_WHOLE_SIZE, 0, &a->map), "vkMapMemory", what);
  if (st) {
    v->vkDestroyBuffer(v->device, a->buf, NULL);
    if (a->mem) v->vkFreeMemory(v->device, a->mem, NULL);
    return st;
  }
  VkBufferDeviceAddressInfo di = { .sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = a->buf };
  a->addr = v->vkGetBufferDeviceAddress(v->device, &di);
  a->size = bytes;
  return KILN_OK;
}

static void free_buffer(VkDev *v, VkAlloc *a) {
  if (a->buf) v->vkDestroyBuffer(v->device, a->buf, NULL);
  if (a->mem) v->vkFreeMemory(v->device, a->mem, NULL);  /* unmaps too */
  memset(a, 0, sizeof *a);
}

/* The allocation holding address b (an arena's offset included), or NULL. */
static VkAlloc *alloc_at(VkProg *x, RtBuf b) {
  for (int i = 0; i < x->n_alloc; i++)
    if (b >= x->allocs[i].addr && b < x->allocs[i].addr + (RtBuf)(x->allocs[i].size < 256 ? 256 : x->allocs[i].size))
      return &x->allocs[i];
  return NULL;
}

/* A command buffer of the program's pool, begun with flags; what: for the message. A batch
 * (one-time submit) reuses an idle one: allocating per run costs a run's worth of time on
 * some drivers. */
static kiln_status begin_cb(VkProg *x, VkCommandBufferUsageFlags flags, const char *what, VkCommandBuffer *out) {
  VkDev *v = x->v;
  VkCommandBufferAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = x->pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1 };
  VkCommandBuffer cb;
  kiln_status st = KILN_OK;
  if ((flags & VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT) && x->n_idle) cb = x->idle[--x->n_idle];
  else st = vk_check(v->vkAllocateCommandBuffers(v->device, &ai, &cb), "vkAllocateCommandBuffers", what);
  if (st) return st;
  VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = flags };
  if ((st = vk_check(v->vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer", what))) {
    v->vkFreeCommandBuffers(v->device, x->pool, 1, &cb);
    return st;
  }
  *out = cb;
  return KILN_OK;
}

/* Timestamp `which` (0 or 1) of pair `pair` (0 the run's, 1 the schedule's) into cb, once all
 * before it is done; 0 resets the pair first. */
static void write_mark(VkProg *x, VkCommandBuffer cb, int pair, int which) {
  if (which == 0) x->v->vkCmdResetQueryPool(cb, x->stamps, (uint32_t)(2 * pair), 2);
  VkPipelineStageFlagBits at = VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT;
  if (pair == 1 && which == 0 && x->v->stamp_start == 1) at = VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT;
  if (pair == 1 && which == 1 && x->v->stamp_end_compute) at = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
  x->v->vkCmdWriteTimestamp(cb, at, x->stamps, (uint32_t)(2 * pair + which));
}

/* A barrier behind everything before it, for a dispatch or any command (cmd_for). */
static void record_barrier(VkDev *v, VkCommandBuffer cb, bool dispatch) {
  VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                         .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                         .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT };
  VkPipelineStageFlags src = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, dst = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  if (dispatch && v->compute_barriers) {
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    src = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    dst = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
  }
  v->vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* The open command buffer, begun if none is, with a barrier behind everything before it
 * (in this buffer and in earlier submissions) for the command about to be recorded: every
 * stage and access, or for a dispatch where v->compute_barriers (the default; not where
 * KILN_VULKAN_BARRIER=all) what a dispatch can depend on: shader and transfer writes. On the
 * H200 the barrier on everything cost the models 20-30 % and made a layernorm's time bimodal. */
static kiln_status cmd_for(VkProg *x, bool dispatch, VkCommandBuffer *out) {
  VkCommandBuffer cb = x->graph_cb ? x->graph_cb : x->open;
  if (!cb) {
    kiln_status st = begin_cb(x, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, "batch", &cb);
    if (st) return st;
    x->open = cb;
  }
  if (!x->graph_cb) x->others++;
  if (!(x->graph_cb && x->barrier_recorded && dispatch)) record_barrier(x->v, cb, dispatch);
  if (x->graph_cb) x->barrier_recorded = false;
  if (cb == x->open) x->open_used = true;
  *out = cb;
  return KILN_OK;
}

static kiln_status cmd(VkProg *x, VkCommandBuffer *out) { return cmd_for(x, false, out); }

/* The open command buffer, ended and queued for the next sync. */
static kiln_status close_open(VkProg *x) {
  if (!x->open) return KILN_OK;
  VkCommandBuffer cb = x->open;
  x->open = NULL;
  /* what follows (a schedule, in this submission or a later one) is ordered behind it here */
  if (!x->v->lead_barrier) record_barrier(x->v, cb, false);
  kiln_status st = vk_check(x->v->vkEndCommandBuffer(cb), "vkEndCommandBuffer", "batch");
  if (!st && !grow(&x->pending, x->n_pending, &x->cap_pending, sizeof *x->pending))
    st = kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  if (!st && !grow(&x->spent, x->n_spent, &x->cap_spent, sizeof *x->spent))
    st = kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  if (st) { x->v->vkFreeCommandBuffers(x->v->device, x->pool, 1, &cb); return st; }
  x->pending[x->n_pending++] = cb;
  x->spent[x->n_spent++] = cb;
  return KILN_OK;
}

/* Staging kept between runs, in bytes: a run's inputs and outputs go through the same
 * buffers every time, without an allocation. */
#define SPARE_BYTES ((int64_t)256 << 20)

/* After a wait: staging buffers become spare (or are freed past SPARE_BYTES), finished
 * batches idle, the download list empty. */
static void settle(VkProg *x) {
  VkDev *v = x->v;
  for (int i = 0; i < x->n_staging; i++) {
    VkAlloc *a = &x->staging[i];
    if (x->spare_bytes + a->size <= SPARE_BYTES && grow(&x->spare, x->n_spare, &x->cap_spare, sizeof *x->spare)) {
      x->spare[x->n_spare++] = *a;
      x->spare_bytes += a->size;
    } else {
      free_buffer(v, a);
    }
  }
  x->n_staging = 0;
  for (int i = 0; i < x->n_spent; i++) {
    if (grow(&x->idle, x->n_idle, &x->cap_idle, sizeof *x->idle)) x->idle[x->n_idle++] = x->spent[i];
    else v->vkFreeCommandBuffers(v->device, x->pool, 1, &x->spent[i]);
  }
  x->n_spent = x->n_pending = x->n_down = 0;
}

static kiln_status vk_sync(void *dev, const char *what) {
  VkProg *x = dev;
  VkDev *v = x->v;
  kiln_status st = close_open(x);
  if (st || !x->n_pending) return st;
  VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = (uint32_t)x->n_pending,
                      .pCommandBuffers = x->pending };
  pthread_mutex_lock(&v->queue_lock);
  st = vk_check(v->vkQueueSubmit(v->queue, 1, &si, x->fence), "vkQueueSubmit", what);
  pthread_mutex_unlock(&v->queue_lock);
  if (!st) st = vk_check(v->vkWaitForFences(v->device, 1, &x->fence, VK_TRUE, UINT64_MAX), "vkWaitForFences", what);
  if (!st) st = vk_check(v->vkResetFences(v->device, 1, &x->fence), "vkResetFences", what);
  for (int i = 0; !st && i < x->n_down; i++) memcpy(x->downs[i].dst, x->downs[i].src, x->downs[i].n);
  if (st) {  /* the device may still use what was submitted: wait for the queue before freeing */
    pthread_mutex_lock(&v->queue_lock);
    v->vkQueueWaitIdle(v->queue);
    pthread_mutex_unlock(&v->queue_lock);
  }
  settle(x);
  return st;
}

static void vk_close(void *dev) {
  VkProg *x = dev;
  if (!x) return;
  VkDev *v = x->v;
  if (x->pool) {
    if (x->open_used || x->n_pending) vk_sync(x, "close");
    else close_open(x), settle(x);
    if (x->graph_cb) v->vkFreeCommandBuffers(v->device, x->pool, 1, &x->graph_cb);
    if (x->n_idle) v->vkFreeCommandBuffers(v->device, x->pool, (uint32_t)x->n_idle, x->idle);
    v->vkDestroyCommandPool(v->device, x->pool, NULL);
  }
  if (x->pipes_added) vk_pipes_save(v);
  for (int i = 0; i < x->n_alloc; i++) free_buffer(v, &x->allocs[i]);
  for (int i = 0; i < x->n_spare; i++) free_buffer(v, &x->spare[i]);
  if (x->fence) v->vkDestroyFence(v->device, x->fence, NULL);
  if (x->stamps) v->vkDestroyQueryPool(v->device, x->stamps, NULL);
  kiln_free(x->pending), kiln_free(x->spent), kiln_free(x->idle), kiln_free(x->allocs), kiln_free(x->staging);
  kiln_free(x->spare), kiln_free(x->downs);
  kiln_free(x);
}

static kiln_status vk_open(const kiln_options *o, void **dev) {
  (void)o;
  VkProg *x = kiln_calloc(1, sizeof *x);
  if (!x) return kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: no memory for a program");
  kiln_status st = vk_device(&x->v);
  VkDev *v = x->v;
  VkCommandPoolCreateInfo pc = { .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,  /* batches are begun again */
                                 .queueFamilyIndex = st ? 0 : v->family };
  VkFenceCreateInfo fc = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
  if (!st) st = vk_check(v->vkCreateCommandPool(v->device, &pc, NULL, &x->pool), "vkCreateCommandPool", "program");
  if (!st) st = vk_check(v->vkCreateFence(v->device, &fc, NULL, &x->fence), "vkCreateFence", "program");
  if (!st && v->timestamp_ns > 0) {
    VkQueryPoolCreateInfo qc = { .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                 .queryCount = 4 };
    st = vk_check(v->vkCreateQueryPool(v->device, &qc, NULL, &x->stamps), "vkCreateQueryPool", "timestamps");
    const char *where = getenv("KILN_VULKAN_STAMPS");
    x->graph_stamps = !st && !(where && !strcmp(where, "batch"));
  }
  if (st) { vk_close(x); return st; }
  *dev = x;
  return KILN_OK;
}

static kiln_status vk_alloc(void *dev, int64_t bytes, const char *what, RtBuf *out) {
  VkProg *x = dev;
  if (!grow(&x->allocs, x->n_alloc, &x->cap_alloc, sizeof *x->allocs))
    return kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  kiln_status st = make_buffer(x->v, bytes, x->v->mem_device, false, what, &x->allocs[x->n_alloc]);
  if (st) return st;
  *out = x->allocs[x->n_alloc++].addr;
  return KILN_OK;
}

static void vk_release(void *dev, RtBuf b) {
  VkProg *x = dev;
  VkAlloc *a = alloc_at(x, b);
  if (!a || a->addr != b) return;
  if (x->open_used || x->n_pending) vk_sync(x, "release");  /* a recorded command may still use it */
  free_buffer(x->v, a);
  *a = x->allocs[--x->n_alloc];
}

/* A region [b, b + n) of one device allocation: its buffer and offset. */
static kiln_status region(VkProg *x, RtBuf b, int64_t n, const char *what, VkBuffer *buf, VkDeviceSize *off) {
  VkAlloc *a = alloc_at(x, b);
  if (!a || (int64_t)(b - a->addr) + n > (a->size < 256 ? 256 : a->size))
    return kiln_fail(KILN_ERR_INVALID_ARG, "vulkan: %s: %lld bytes at 0x%llx are not inside one buffer", what, (long long)n,
                     (unsigned long long)b);
  *buf = a->buf, *off = b - a->addr;
  return KILN_OK;
}

/* A staging buffer of at least n bytes until the next wait: the smallest spare one that
 * holds n, else a new one. */
static kiln_status stage(VkProg *x, int64_t n, const char *what, VkAlloc **out) {
  if (!grow(&x->staging, x->n_staging, &x->cap_staging, sizeof *x->staging))
    return kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  int best = -1;
  for (int i = 0; i < x->n_spare; i++)
    if (x->spare[i].size >= n && (best < 0 || x->spare[i].size < x->spare[best].size)) best = i;
  if (best >= 0) {
    x->staging[x->n_staging] = x->spare[best];
    x->spare_bytes -= x->spare[best].size;
    x->spare[best] = x->spare[--x->n_spare];
  } else {
    kiln_status st = make_buffer(x->v, n, x->v->mem_host, true, what, &x->staging[x->n_staging]);
    if (st) return st;
  }
  *out = &x->staging[x->n_staging++];
  return KILN_OK;
}

static kiln_status vk_upload(void *dev, RtBuf dst, const void *src, int64_t n, const char *what) {
  VkProg *x = dev;
  VkBuffer b = VK_NULL_HANDLE;
  VkDeviceSize off = 0;
  VkAlloc *s = NULL;
  VkCommandBuffer cb = NULL;
  kiln_status st = region(x, dst, n, what, &b, &off);
  if (!st) st = stage(x, n, what, &s);
  if (!st) st = cmd(x, &cb);
  if (st) return st;
  memcpy(s->map, src, (size_t)n);  /* the caller's memory may change once this returns */
  VkBufferCopy c = { .srcOffset = 0, .dstOffset = off, .size = (VkDeviceSize)n };
  x->v->vkCmdCopyBuffer(cb, s->buf, b, 1, &c);
  return KILN_OK;
}

static kiln_status vk_download(void *dev, void *dst, RtBuf src, int64_t n, const char *what) {
  VkProg *x = dev;
  VkBuffer b = VK_NULL_HANDLE;
  VkDeviceSize off = 0;
  VkAlloc *s = NULL;
  VkCommandBuffer cb = NULL;
  kiln_status st = region(x, src, n, what, &b, &off);
  if (!st) st = stage(x, n, what, &s);
  if (!st && !grow(&x->downs, x->n_down, &x->cap_down, sizeof *x->downs))
    st = kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  if (!st) st = cmd(x, &cb);
  if (st) return st;
  VkBufferCopy c = { .srcOffset = off, .dstOffset = 0, .size = (VkDeviceSize)n };
  x->v->vkCmdCopyBuffer(cb, b, s->buf, 1, &c);
  x->downs[x->n_down++] = (VkDownload){ dst, s->map, (size_t)n };  /* copied out after the wait */
  return KILN_OK;
}

static kiln_status vk_copy(void *dev, RtBuf dst, RtBuf src, int64_t n, const char *what) {
  VkProg *x = dev;
  VkBuffer bd = VK_NULL_HANDLE, bs = VK_NULL_HANDLE;
  VkDeviceSize od = 0, os = 0;
  VkCommandBuffer cb = NULL;
  kiln_status st = region(x, dst, n, what, &bd, &od);
  if (!st) st = region(x, src, n, what, &bs, &os);
  if (!st) st = cmd(x, &cb);
  if (st) return st;
  VkBufferCopy c = { .srcOffset = os, .dstOffset = od, .size = (VkDeviceSize)n };
  x->v->vkCmdCopyBuffer(cb, bs, bd, 1, &c);
  return KILN_OK;
}

static void module_free(VkDev *v, VkModule *m);

/* The feature the device lacks for a capability the SPIR-V module declares (OpCapability,
 * opcode 17, in the instructions after the 5-word header), or NULL. */
static const VkLack *spv_lacks(const VkDev *v, const uint32_t *w, size_t bytes) {
  size_t n = bytes / 4;
  for (size_t i = 5; i < n;) {
    uint32_t op = w[i] & 0xffffu, len = w[i] >> 16;
    if (len == 0) break;
    if (op == 17 && i + 1 < n)
      for (int k = 0; k < v->n_lacking; k++)
        if (w[i + 1] == v->lacking[k].cap) return &v->lacking[k];
    i += len;
  }
  return NULL;
}

/* Every kernel of the source ("#if KILN_KERNEL == <n>", the dialect's kernel_begin) compiled
 * now, so that a compile error stops the build and the census knows whether all came from
 * the cache. */
static kiln_status vk_build(void *dev, const char *src, size_t len, const kiln_options *o, void **module, bool *hit) {
  VkProg *x = dev;
  static const char mark[] = "\n#if KILN_KERNEL == ";
  if (o->cache_dir[0]) vk_pipes_open(x->v, o->cache_dir, o->no_cache);
  VkModule *m = kiln_calloc(1, sizeof *m);
  if (!m) return kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  for (const char *at = strstr(src, mark); at; at = strstr(at + 1, mark)) {
    long k = strtol(at + sizeof mark - 1, NULL, 10);
    if (k >= m->n_kernels) m->n_kernels = (int)k + 1;
  }
  m->spv = kiln_calloc((size_t)m->n_kernels + 1, sizeof *m->spv);
  m->bytes = kiln_calloc((size_t)m->n_kernels + 1, sizeof *m->bytes);
  kiln_status st = m->spv && m->bytes ? KILN_OK : kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  int *kernels = st ? NULL : kiln_calloc((size_t)m->n_kernels + 1, sizeof *kernels), n = 0;
  if (!st && !kernels) st = kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  for (const char *at = strstr(src, mark); at && !st; at = strstr(at + 1, mark)) kernels[n++] = (int)strtol(at + sizeof mark - 1, NULL, 10);
  uint32_t **spv = st ? NULL : kiln_calloc((size_t)n + 1, sizeof *spv);
  size_t *bytes = st ? NULL : kiln_calloc((size_t)n + 1, sizeof *bytes);
  if (!st && (!spv || !bytes)) st = kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  if (!st) st = vk_compile(x->v, src, len, kernels, n, o, spv, bytes, hit);
  for (int i = 0; !st && i < n; i++) m->spv[kernels[i]] = spv[i], m->bytes[kernels[i]] = bytes[i], spv[i] = NULL;
  /* a kernel that needs a feature the device lacks is refused by name: never run through a
   * narrower type (f64 maths in f32), never handed to a driver that may misbehave on it */
  for (int i = 0; !st && i < n; i++) {
    const VkLack *lacks = spv_lacks(x->v, m->spv[kernels[i]], m->bytes[kernels[i]]);
    if (lacks)
      st = kiln_fail(KILN_ERR_UNSUPPORTED, "kernel kiln_k%d: needs %s (%s), which %s lacks: a missing capability",
                     kernels[i], lacks->what, lacks->feature, x->v->props.deviceName);
  }
  for (int i = 0; spv && i < n; i++) kiln_free(spv[i]);
  kiln_free(kernels), kiln_free(spv), kiln_free(bytes);
  if (st) { module_free(x->v, m); return st; }
  *module = m;
  return KILN_OK;
}

static void fn_free(VkDev *v, VkFn *f) {
  if (!f) return;
  for (int i = 0; i < f->n_args; i++) free_buffer(v, &f->args[i].table);
  if (f->pipe) v->vkDestroyPipeline(v->device, f->pipe, NULL);
  if (f->shader) v->vkDestroyShaderModule(v->device, f->shader, NULL);
  kiln_free(f->args);
  kiln_free(f);
}

static void module_free(VkDev *v, VkModule *m) {
  for (int i = 0; i < m->n_fn; i++) fn_free(v, m->fns[i]);
  for (int i = 0; m->spv && i < m->n_kernels; i++) kiln_free(m->spv[i]);
  kiln_free(m->fns), kiln_free(m->spv), kiln_free(m->bytes);
  kiln_free(m);
}

static void vk_unload(void *dev, void *module) {
  VkProg *x = dev;
  if (x->open_used || x->n_pending) vk_sync(x, "unload");
  module_free(x->v, module);
}

static kiln_status vk_lookup(void *dev, void *module, const CgLaunch *l, void **fn) {
  VkProg *x = dev;
  VkDev *v = x->v;
  VkModule *m = module;
  if (l->block < 1 || (uint32_t)l->block > v->max_threads)
    return kiln_fail(KILN_ERR_DEVICE, "vulkan: kernel %d needs %d threads per workgroup, %s allows %u", l->kernel, l->block,
                     v->props.deviceName, v->max_threads);
  if (!grow(&m->fns, m->n_fn, &m->cap_fn, sizeof *m->fns)) return kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  VkFn *f = kiln_calloc(1, sizeof *f);
  if (!f) return kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  m->fns[m->n_fn++] = f;
  if (l->kernel < 0 || l->kernel >= m->n_kernels || !m->spv[l->kernel])
    return kiln_fail(KILN_ERR_DEVICE, "vulkan: the source has no kernel %s", l->name);
  VkShaderModuleCreateInfo sc = { .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = m->bytes[l->kernel],
                                  .pCode = m->spv[l->kernel] };
  kiln_status st = vk_check(v->vkCreateShaderModule(v->device, &sc, NULL, &f->shader), "vkCreateShaderModule", l->name);
  if (st) return st;
  uint32_t block = (uint32_t)l->block;
  VkSpecializationMapEntry me = { .constantID = 0, .offset = 0, .size = sizeof block };
  VkSpecializationInfo spec = { .mapEntryCount = 1, .pMapEntries = &me, .dataSize = sizeof block, .pData = &block };
  VkComputePipelineCreateInfo pc = {
    .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
    .stage = { .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
               .module = f->shader, .pName = "main", .pSpecializationInfo = &spec },
    .layout = v->layout,
  };
  st = vk_check(v->vkCreateComputePipelines(v->device, v->pipes, 1, &pc, NULL, &f->pipe), "vkCreateComputePipelines",
                l->name);
  if (!st) x->pipes_added = true;
  if (!st) *fn = f;
  return st;
}

/* The table of args[0..n) in host-visible memory: one of f's own with the same addresses, or a new one. */
static kiln_status arg_table(VkProg *x, VkFn *f, const RtBuf *args, int n, RtBuf *out) {
  for (int i = 0; i < f->n_args; i++)
    if (f->args[i].n == n && !memcmp(f->args[i].table.map, args, (size_t)n * sizeof *args)) {
      *out = f->args[i].table.addr;
      return KILN_OK;
    }
  if (!grow(&f->args, f->n_args, &f->cap_args, sizeof *f->args)) return kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  VkArgs *a = &f->args[f->n_args];
  kiln_status st = make_buffer(x->v, (int64_t)(n ? n : 1) * (int64_t)sizeof *args, x->v->mem_table, true,
                               "a kernel's buffer table",
                               &a->table);
  if (st) return st;
  memcpy(a->table.map, args, (size_t)n * sizeof *args);
  a->n = n;
  f->n_args++;
  *out = a->table.addr;
  return KILN_OK;
}

static kiln_status vk_launch(void *dev, void *fn, const CgLaunch *l, const RtBuf *args) {
  VkProg *x = dev;
  VkDev *v = x->v;
  VkFn *f = fn;
  if (l->grid < 1 || l->grid > UINT32_MAX) return kiln_fail(KILN_ERR_DEVICE, "vulkan: kernel %s has a grid of %lld", l->name, (long long)l->grid);
  uint32_t gx = l->grid < v->max_groups[0] ? (uint32_t)l->grid : v->max_groups[0];
  uint64_t gy = ((uint64_t)l->grid + gx - 1) / gx;
  if (gy > v->max_groups[1])
    return kiln_fail(KILN_ERR_DEVICE, "vulkan: kernel %s needs %lld workgroups, more than %s dispatches", l->name,
                     (long long)l->grid, v->props.deviceName);
  VkPush push = { .grid = (uint32_t)l->grid };
  VkCommandBuffer cb = NULL;
  /* the renderer reads a kernel's addresses from the push constants in exactly this case */
  bool direct = !v->args_table && l->n_params <= cg_dialect_glsl.direct_args && l->n_params <= VK_DIRECT_ARGS;
  kiln_status st = KILN_OK;
  if (direct) memcpy(push.a, args, (size_t)l->n_params * sizeof *args);
  else st = arg_table(x, f, args, l->n_params, &push.args);
  if (!st) st = cmd_for(x, true, &cb);
  if (st) return st;
  v->vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, f->pipe);
  v->vkCmdPushConstants(cb, v->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                        (uint32_t)(offsetof(VkPush, a) + (direct ? (size_t)l->n_params * sizeof *args : 0)), &push);
  v->vkCmdDispatch(cb, gx, (uint32_t)gy, 1);
  return KILN_OK;
}

static kiln_status vk_record_begin(void *dev) {
  VkProg *x = dev;
  if (x->graph_cb) return kiln_fail(KILN_ERR_INVALID_ARG, "vulkan: a schedule is being recorded already");
  /* replayed many times, and queued more than once before a wait (runs of several times) */
  kiln_status st = begin_cb(x, VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT, "schedule", &x->graph_cb);
  /* Every command buffer before it ends with a barrier (close_open, vk_record_end), so the first
   * dispatch records none: in a run after a wait there is nothing left to wait on, and a barrier
   * there cost the H200's rows ~1.2 us of the run's time (any other command first records one).
   * Under KILN_VULKAN_LEAD_BARRIER=1 the first dispatch waits on earlier work, except where
   * KILN_VULKAN_STAMP_START=outside puts that wait before the start stamp. */
  bool outside = x->v->lead_barrier && x->graph_stamps && x->v->stamp_start == 2;
  x->barrier_recorded = !st && (!x->v->lead_barrier || outside);
  if (!st && outside) record_barrier(x->v, x->graph_cb, true);
  if (!st && x->graph_stamps) write_mark(x, x->graph_cb, 1, 0);
  return st;
}

static kiln_status vk_record_end(void *dev, void **graph) {
  VkProg *x = dev;
  VkCommandBuffer cb = x->graph_cb;
  x->graph_cb = NULL;
  if (!cb) return kiln_fail(KILN_ERR_INVALID_ARG, "vulkan: no schedule is being recorded");
  if (x->graph_stamps) write_mark(x, cb, 1, 1);
  /* the next replay (queued behind this one in runs of several), downloads and uploads wait here,
   * after the end stamp, outside the run's time */
  if (!x->v->lead_barrier) record_barrier(x->v, cb, false);
  kiln_status st = vk_check(x->v->vkEndCommandBuffer(cb), "vkEndCommandBuffer", "schedule");
  if (st) { x->v->vkFreeCommandBuffers(x->v->device, x->pool, 1, &cb); return st; }
  *graph = cb;
  return KILN_OK;
}

static kiln_status vk_replay(void *dev, void *graph) {
  VkProg *x = dev;
  kiln_status st = close_open(x);  /* what was recorded before the run goes first */
  if (!st && !grow(&x->pending, x->n_pending, &x->cap_pending, sizeof *x->pending))
    st = kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  if (st) return st;
  x->pending[x->n_pending++] = graph;
  x->replays++;
  return KILN_OK;
}

static void vk_graph_free(void *dev, void *graph) {
  VkProg *x = dev;
  if (x->open_used || x->n_pending) vk_sync(x, "free");
  VkCommandBuffer cb = graph;
  x->v->vkFreeCommandBuffers(x->v->device, x->pool, 1, &cb);
}

static kiln_status vk_mark(void *dev, int which) {
  VkProg *x = dev;
  if (!x->stamps) return KILN_OK;
  if (x->graph_cb) return kiln_fail(KILN_ERR_INVALID_ARG, "vulkan: a timestamp inside a recorded schedule");
  if (which == 1) x->graph_span = x->graph_stamps && x->replays == 1 && x->others == 0;
  VkCommandBuffer cb;
  kiln_status st = cmd(x, &cb);
  if (st) return st;
  write_mark(x, cb, 0, which);
  if (which == 0) x->replays = 0, x->others = 0;
  return KILN_OK;
}

static kiln_status vk_elapsed(void *dev, double *ms) {
  VkProg *x = dev;
  *ms = 0;
  if (!x->stamps) return KILN_OK;
  uint64_t t[2];
  kiln_status st = vk_check(x->v->vkGetQueryPoolResults(x->v->device, x->stamps, x->graph_span ? 2 : 0, 2, sizeof t, t,
                                                        sizeof t[0], VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                            "vkGetQueryPoolResults", "run time");
  if (!st) *ms = (double)(t[1] - t[0]) * x->v->timestamp_ns * 1e-6;
  return st;
}

static void vk_describe(void *dev, FILE *f) {
  VkProg *x = dev;
  fprintf(f, "vulkan: %s, GLSL through %s\n", x->v->props.deviceName, x->v->glslc_version);
}

const Backend rt_backend_vulkan = {
  .name = "vulkan",
  .dialect = &cg_dialect_glsl,
  .host_memory = false,
  .probe = vk_probe,
  .open = vk_open,
  .close = vk_close,
  .alloc = vk_alloc,
  .release = vk_release,
  .upload = vk_upload,
  .download = vk_download,
  .copy = vk_copy,
  .build = vk_build,
  .unload = vk_unload,
  .lookup = vk_lookup,
  .launch = vk_launch,
  .record_begin = vk_record_begin,
  .record_end = vk_record_end,
  .replay = vk_replay,
  .graph_free = vk_graph_free,
  .sync = vk_sync,
  .mark = vk_mark,
  .elapsed = vk_elapsed,
  .describe = vk_describe,
};

#else  /* built without the Vulkan headers (Debian libvulkan-dev) */
#include "../runtime.h"

static kiln_status vk_absent(void) {
  return kiln_fail(KILN_ERR_DEVICE, "vulkan: this kiln was built without the Vulkan headers "
                   "(scripts/install-deps installs them)");
}
static kiln_status vk_open_absent(const kiln_options *o, void **dev) { (void)o, (void)dev; return vk_absent(); }
static void vk_close_absent(void *dev) { (void)dev; }

const Backend rt_backend_vulkan = {
  .name = "vulkan",
  .dialect = &cg_dialect_glsl,
  .probe = vk_absent,
  .open = vk_open_absent,
  .close = vk_close_absent,
};
#endif
