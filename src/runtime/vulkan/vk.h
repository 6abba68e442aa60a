/*
 * vk.h — the vulkan backend's private header: the Vulkan loader, found at run time with
 * dlopen (so one build runs with and without it), the one device a process uses, and the
 * GLSL compiler. device.c fills the table once per process; vulkan.c is the backend's hooks.
 */
#ifndef KILN_VK_H
#define KILN_VK_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "../runtime.h"

#include <pthread.h>

/* The entry points kiln calls, each loaded through vkGetInstanceProcAddr/vkGetDeviceProcAddr. */
#define VK_INSTANCE_FNS(X) \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties) \
  X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)
#define VK_DEVICE_FNS(X) \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkQueueSubmit) X(vkQueueWaitIdle) X(vkCreateBuffer) X(vkDestroyBuffer) \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) \
  X(vkGetBufferDeviceAddress) X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) \
  X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkCmdCopyBuffer) X(vkCmdPipelineBarrier) \
  X(vkCmdBindPipeline) X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdWriteTimestamp) X(vkCmdResetQueryPool) \
  X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences) X(vkCreateShaderModule) \
  X(vkDestroyShaderModule) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) \
  X(vkDestroyPipeline) X(vkCreatePipelineCache) X(vkDestroyPipelineCache) X(vkGetPipelineCacheData) X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkGetQueryPoolResults)

/* The push constants every kernel's entry reads (dialect_glsl.c's Kpush). */
enum { VK_DIRECT_ARGS = 13 };  /* cg_dialect_glsl.direct_args */
typedef struct VkPush { RtBuf args; uint32_t grid, pad; RtBuf a[VK_DIRECT_ARGS]; } VkPush;

/* A SPIR-V capability whose feature the device lacks (kernels that declare it are refused). */
typedef struct VkLack { uint32_t cap; const char *feature, *what; } VkLack;

typedef struct VkDev {
  void *lib;
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define VK_FIELD(name) PFN_##name name;
  VK_INSTANCE_FNS(VK_FIELD)
  VK_DEVICE_FNS(VK_FIELD)
#undef VK_FIELD
  VkInstance instance;
  VkPhysicalDevice phys;
  VkDevice device;
  VkQueue queue;
  uint32_t family;
  pthread_mutex_t queue_lock;        /* vkQueueSubmit needs the queue to itself */
  VkPipelineLayout layout;           /* every kernel's: no descriptors, VkPush */
  uint32_t mem_device, mem_host;     /* memory types: device-local; host-visible and coherent */
  int64_t alloc_round;               /* device buffers' sizes rounded up to a multiple of this (KILN_VULKAN_ALLOC_ROUND;
                                        a race of page sizes; 0: none) */
  uint32_t mem_table;                /* the kernels' buffer tables (every workgroup reads one): device-local and
                                        host-visible where the device has such memory, else mem_host */
  uint32_t max_groups[2];            /* maxComputeWorkGroupCount x, y */
  uint32_t max_threads;              /* maxComputeWorkGroupSize x */
  double timestamp_ns;               /* timestampPeriod; 0: no timestamps on the queue */
  VkPhysicalDeviceProperties props;
  char glslc[256];                   /* the GLSL compiler (KILN_GLSLC, else glslc on the PATH) */
  char glslc_version[256];           /* its --version, part of the cache key */
  char defines[8][32];               /* -D flags of every compile: what the device guarantees */
  int n_defines;
  bool subgroups;                    /* block reductions by subgroup shuffles (else shared memory) */
  bool compute_barriers;             /* dispatches wait on shader and transfer writes only (cmd_for) */
  int stamp_start;                   /* a schedule's start stamp (KILN_VULKAN_STAMP_START, a race): 0 at the
                                        bottom of the pipe, 1 at its top, 2 at the bottom after the barrier
                                        on earlier work that its first dispatch would record */
  bool lead_barrier;                 /* the old order (KILN_VULKAN_LEAD_BARRIER=1, a race): a schedule's first
                                        dispatch waits on earlier work, and no command buffer ends with a
                                        barrier; by default every command buffer ends with one instead */
  bool stamp_end_compute;             /* the schedule's end stamp at the compute stage, not the bottom of the
                                        pipe (KILN_VULKAN_STAMP_END=compute, a race) */
  VkLack lacking[8];                 /* optional features the device lacks (or KILN_VULKAN_WITHOUT withholds) */
  int n_lacking;
  bool args_table;                   /* every kernel reads its buffers' addresses from a table, none pushed
                                        (KILN_VULKAN_ARGS=table, a race; shaders get KILN_ARGS_TABLE) */
  VkPipelineCache pipes;             /* the driver's compiled pipelines, kept on disk (vk_pipes_open) */
  bool pipes_tried;
  char pipes_path[4200];
} VkDev;

/* The process's device, set up on first use (KILN_VULKAN_DEVICE picks one by its index in
 * vkEnumeratePhysicalDevices; by default the first GPU, else the first device). */
kiln_status vk_device(VkDev **out);
/* The pipeline cache, from <dir>/vk-pipelines-<pipelineCacheUUID>.bin at the first build of
 * the process (the driver checks the data's device and version; a mismatch starts empty),
 * or empty with no_cache; vk_pipes_save writes it back (a program that made pipelines calls it at close). */
void vk_pipes_open(VkDev *v, const char *dir, bool no_cache);
void vk_pipes_save(VkDev *v);
/* A VkResult as a kiln failure naming the call and what it was for. */
kiln_status vk_check(VkResult r, const char *call, const char *what);
/* Kernels kernels[0..n) of the GLSL src compiled to SPIR-V (kiln_malloc'ed, spv[i] and bytes[i]
 * for kernels[i]), each with KILN_KERNEL defined as its number: from the on-disk cache where
 * it holds them (the key hashes the compiler's version, its flags and the source; a hit is
 * checked against the stored source), else by glslc, one process a kernel, as many at once as
 * there are CPUs. *all_hit: every one came from the cache. A compile error names the kernel
 * and carries glslc's message. */
kiln_status vk_compile(VkDev *v, const char *src, size_t len, const int *kernels, int n, const kiln_options *o,
                       uint32_t **spv, size_t *bytes, bool *all_hit);

#endif
