/*
 * device.c — finds Vulkan and the GLSL compiler at run time. Takes nothing; produces the
 * VkDev table (vk.h), filled once per process under pthread_once: the loader
 * (libvulkan.so.1) and its entry points, an instance, one physical device with what kiln's
 * shaders need (buffer device addresses, 64-bit integers and floats, 8- and 16-bit storage
 * and arithmetic), its compute queue and the one pipeline layout; and glslc. A machine
 * without them is normal: the first failure is remembered and repeated, so `kiln` can say
 * why vulkan is unavailable while everything else runs.
 *
 * GLSL goes to SPIR-V through shaderc's glslc, started as a process (as the cpu backend
 * starts cc): Debian 12's libshaderc.so.1 cannot be loaded by a program (it leaves glslang's
 * and SPIRV-Tools' symbols to the executable that links it, which only glslc does), and
 * Debian ships glslang and SPIRV-Tools as static archives alone.
 */
#if __has_include(<vulkan/vulkan.h>)
#include "vk.h"

#include <dlfcn.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static VkDev vk;
static kiln_status vk_status;
static char vk_why[512];
static pthread_once_t vk_once = PTHREAD_ONCE_INIT;

kiln_status vk_check(VkResult r, const char *call, const char *what) {
  if (r == VK_SUCCESS) return KILN_OK;
  return kiln_fail(r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY ? KILN_ERR_NO_MEMORY
                                                                                            : KILN_ERR_DEVICE,
                   "vulkan: %s (%s): VkResult %d", call, what, (int)r);
}

static bool sym(void *lib, void *fnptr, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) return false;
  memcpy(fnptr, &p, sizeof p);  /* object -> function pointer without a cast warning */
  return true;
}

/* The compiler's identity: `glslc --version`'s first line; not found is an error now rather
 * than at the first compile. */
static kiln_status find_glslc(void) {
  const char *env = getenv("KILN_GLSLC");
  snprintf(vk.glslc, sizeof vk.glslc, "%s", env && *env ? env : "glslc");
  int fd[2];
  if (pipe(fd)) return kiln_fail(KILN_ERR_IO, "vulkan: pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
  posix_spawn_file_actions_addclose(&fa, fd[0]);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  char *argv[] = { vk.glslc, "--version", NULL };
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd[1]);
  size_t n = 0;
  ssize_t got;
  while (rc == 0 && n < sizeof vk.glslc_version - 1 &&
         (got = read(fd[0], vk.glslc_version + n, sizeof vk.glslc_version - 1 - n)) > 0)
    n += (size_t)got;
  close(fd[0]);
  int status = 0;
  if (rc == 0) while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  vk.glslc_version[n] = 0;
  char *nl = strchr(vk.glslc_version, '\n');
  if (nl) *nl = 0;
  if (rc || !WIFEXITED(status) || WEXITSTATUS(status) || !n)
    return kiln_fail(KILN_ERR_DEVICE, "vulkan: no GLSL compiler: '%s --version' %s (Debian glslc; or set KILN_GLSLC)",
                     vk.glslc, rc ? strerror(rc) : "failed");
  return KILN_OK;
}

/* What kiln's shaders need of a device, each named when it is missing. */
typedef struct Needs {
  VkPhysicalDeviceFeatures2 f;
  VkPhysicalDeviceVulkan11Features f11;
  VkPhysicalDeviceVulkan12Features f12;
} Needs;

static void needs_chain(Needs *n) {
  memset(n, 0, sizeof *n);
  n->f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  n->f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  n->f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  n->f.pNext = &n->f11;
  n->f11.pNext = &n->f12;
}

/* The named feature is one KILN_VULKAN_WITHOUT lists (names separated by commas or spaces):
 * treated as absent, to see what a model needs of a device that lacks it (the tests do). */
static bool withheld(const char *name) {
  const char *w = getenv("KILN_VULKAN_WITHOUT");
  size_t n = strlen(name);
  for (const char *at = w ? strstr(w, name) : NULL; at; at = strstr(at + 1, name))
    if ((at == w || strchr(" ,", at[-1])) && (at[n] == 0 || strchr(" ,", at[n]))) return true;
  return false;
}

/* The first feature kiln needs that d lacks, or NULL; want gets exactly the needed ones that
 * d has. Addresses need the first two; the others only kernels whose SPIR-V declares their
 * capability: one the device lacks goes to vk.lacking, and vk_build refuses such a kernel by
 * name (f64 maths, 16- and 8-bit values) instead of the whole device. */
static const char *missing_feature(const Needs *have, Needs *want) {
  needs_chain(want);
  struct { VkBool32 has, *set; const char *name; uint32_t cap; const char *what; } need[] = {
    { have->f12.bufferDeviceAddress, &want->f12.bufferDeviceAddress, "bufferDeviceAddress", 0, NULL },
    { have->f.features.shaderInt64, &want->f.features.shaderInt64, "shaderInt64", 0, NULL },
    { have->f.features.shaderFloat64, &want->f.features.shaderFloat64, "shaderFloat64", 10, "f64 arithmetic" },
    { have->f.features.shaderInt16, &want->f.features.shaderInt16, "shaderInt16", 22, "16-bit integer arithmetic" },
    { have->f12.shaderInt8, &want->f12.shaderInt8, "shaderInt8", 39, "8-bit integer arithmetic (bool, int8, uint8)" },
    { have->f12.storageBuffer8BitAccess, &want->f12.storageBuffer8BitAccess, "storageBuffer8BitAccess", 4448,
      "8-bit values in memory (bool, int8, uint8)" },
    { have->f11.storageBuffer16BitAccess, &want->f11.storageBuffer16BitAccess, "storageBuffer16BitAccess", 4433,
      "16-bit values in memory (f16, bf16, int16)" },
  };
  vk.n_lacking = 0;
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
    bool has = need[i].has && !(need[i].cap && withheld(need[i].name));
    if (!has && !need[i].cap) return need[i].name;
    if (has) *need[i].set = VK_TRUE;
    else vk.lacking[vk.n_lacking++] = (VkLack){ need[i].cap, need[i].name, need[i].what };
  }
  return NULL;
}

static uint32_t memory_type(const VkPhysicalDeviceMemoryProperties *m, VkMemoryPropertyFlags want, VkMemoryPropertyFlags also) {
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t i = 0; i < m->memoryTypeCount; i++) {
      VkMemoryPropertyFlags f = m->memoryTypes[i].propertyFlags;
      if ((f & want) == want && (pass || (f & also) == also)) return i;
    }
  return UINT32_MAX;
}

static kiln_status pick_device(void) {
  uint32_t n = 0;
  kiln_status st = vk_check(vk.vkEnumeratePhysicalDevices(vk.instance, &n, NULL), "vkEnumeratePhysicalDevices", "count");
  if (st) return st;
  if (n == 0) return kiln_fail(KILN_ERR_DEVICE, "vulkan: the loader found no device (no ICD installed?)");
  VkPhysicalDevice *all = kiln_calloc(n, sizeof *all);
  if (!all) return kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  if ((st = vk_check(vk.vkEnumeratePhysicalDevices(vk.instance, &n, all), "vkEnumeratePhysicalDevices", "list"))) {
    kiln_free(all);
    return st;
  }
  const char *env = getenv("KILN_VULKAN_DEVICE");
  int chosen = -1;
  if (env && *env) {
    char *end;
    long i = strtol(env, &end, 10);
    if (*end || i < 0 || i >= (long)n) {
      kiln_free(all);
      return kiln_fail(KILN_ERR_INVALID_ARG, "vulkan: KILN_VULKAN_DEVICE '%s' is not a device index below %u", env, n);
    }
    chosen = (int)i;
  }
  for (uint32_t i = 0; i < n && chosen < 0; i++) {  /* a GPU first */
    VkPhysicalDeviceProperties p;
    vk.vkGetPhysicalDeviceProperties(all[i], &p);
    if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU || p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU)
      chosen = (int)i;
  }
  vk.phys = all[chosen < 0 ? 0 : chosen];
  kiln_free(all);
  vk.vkGetPhysicalDeviceProperties(vk.phys, &vk.props);
  if (vk.props.apiVersion < VK_API_VERSION_1_2)
    return kiln_fail(KILN_ERR_DEVICE, "vulkan: %s supports Vulkan %u.%u; kiln needs 1.2", vk.props.deviceName,
                     VK_API_VERSION_MAJOR(vk.props.apiVersion), VK_API_VERSION_MINOR(vk.props.apiVersion));
  return KILN_OK;
}

/* What the device's shaders may use, as -D flags for the prelude (dialect_glsl.c): subgroup
 * shuffles for block reductions, and the float controls it can promise. Without
 * SignedZeroInfNanPreserve a driver may fold x != x to false (NVIDIA's did: relu of NaN came
 * out 0; the prelude tests NaN by its bits anyway), without DenormPreserve flush f32
 * subnormals (NVIDIA's has none for f32: f32 -> f64 reads the bits). */
static void shader_flags(void) {
  VkPhysicalDeviceVulkan12Properties p12 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES };
  VkPhysicalDeviceVulkan11Properties p11 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES,
                                             .pNext = &p12 };
  VkPhysicalDeviceProperties2 p = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &p11 };
  vk.vkGetPhysicalDeviceProperties2(vk.phys, &p);
  /* block reductions by shuffles: compute shaders, subgroups of 8 lanes or more (the
   * prelude's shared array holds 1024 / 8 results); KILN_VULKAN_SUBGROUPS=0 takes the
   * shared-memory tree instead (the tests run both) */
  const VkSubgroupFeatureFlags ops = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
  const char *sg = getenv("KILN_VULKAN_SUBGROUPS");
  vk.subgroups = (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (p11.subgroupSupportedOperations & ops) == ops &&
                 p11.subgroupSize >= 8 && !(sg && !strcmp(sg, "0"));
  struct { VkBool32 has; const char *flag; } fc[] = {
    { p12.shaderSignedZeroInfNanPreserveFloat32, "-DKILN_NAN_PRESERVE32=1" },
    { p12.shaderSignedZeroInfNanPreserveFloat64, "-DKILN_NAN_PRESERVE64=1" },
    { p12.shaderDenormPreserveFloat32, "-DKILN_DENORM_PRESERVE32=1" },
    { p12.shaderDenormPreserveFloat64, "-DKILN_DENORM_PRESERVE64=1" },
  };
  vk.n_defines = 0;
  if (vk.subgroups) snprintf(vk.defines[vk.n_defines++], sizeof vk.defines[0], "-DKILN_SUBGROUPS=1");
  if (vk.args_table) snprintf(vk.defines[vk.n_defines++], sizeof vk.defines[0], "-DKILN_ARGS_TABLE=1");
  for (size_t i = 0; i < sizeof fc / sizeof fc[0]; i++)
    if (fc[i].has) snprintf(vk.defines[vk.n_defines++], sizeof vk.defines[0], "%s", fc[i].flag);
  /* races of the prelude's switches (KILN_BUF_RESTRICT ...): names from KILN_VULKAN_DEFINES,
   * separated by spaces or commas, letters, digits and '_' only, while there is room */
  const char *ex = getenv("KILN_VULKAN_DEFINES");
  while (ex && *ex) {
    size_t n = strcspn(ex, " ,");
    bool name = n > 0 && n < sizeof vk.defines[0] - 6;
    for (size_t i = 0; name && i < n; i++) name = isalnum((unsigned char)ex[i]) || ex[i] == '_';
    if (name && vk.n_defines < (int)(sizeof vk.defines / sizeof vk.defines[0]))
      snprintf(vk.defines[vk.n_defines++], sizeof vk.defines[0], "-D%.*s=1", (int)n, ex);
    ex += n;
    ex += strspn(ex, " ,");
  }
}

static kiln_status open_device(void) {
  Needs have, want;
  needs_chain(&have);
  vk.vkGetPhysicalDeviceFeatures2(vk.phys, &have.f);
  const char *lacks = missing_feature(&have, &want);
  if (lacks) return kiln_fail(KILN_ERR_DEVICE, "vulkan: %s lacks %s, which kiln's shaders need", vk.props.deviceName, lacks);
  uint32_t nf = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(vk.phys, &nf, NULL);
  VkQueueFamilyProperties qf[32];
  if (nf > 32) nf = 32;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(vk.phys, &nf, qf);
  vk.family = UINT32_MAX;
  for (uint32_t i = 0; i < nf && vk.family == UINT32_MAX; i++)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) vk.family = i;
  if (vk.family == UINT32_MAX) return kiln_fail(KILN_ERR_DEVICE, "vulkan: %s has no compute queue", vk.props.deviceName);
  vk.timestamp_ns = qf[vk.family].timestampValidBits ? vk.props.limits.timestampPeriod : 0;
  float prio = 1.0f;
  VkDeviceQueueCreateInfo q = { .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = vk.family,
                                .queueCount = 1, .pQueuePriorities = &prio };
  VkDeviceCreateInfo dc = { .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &want.f, .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &q };
  kiln_status st = vk_check(vk.vkCreateDevice(vk.phys, &dc, NULL, &vk.device), "vkCreateDevice", vk.props.deviceName);
  if (st) return st;
#define VK_LOAD_DEVICE(name) \
  if (!(vk.name = (PFN_##name)vk.vkGetDeviceProcAddr(vk.device, #name))) \
    return kiln_fail(KILN_ERR_DEVICE, "vulkan: the device lacks %s", #name);
  VK_DEVICE_FNS(VK_LOAD_DEVICE)
#undef VK_LOAD_DEVICE
  vk.vkGetDeviceQueue(vk.device, vk.family, 0, &vk.queue);
  VkPhysicalDeviceMemoryProperties mp;
  vk.vkGetPhysicalDeviceMemoryProperties(vk.phys, &mp);
  vk.mem_device = memory_type(&mp, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  vk.mem_host = memory_type(&mp, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                            VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  /* a table in host memory is read across the bus by every workgroup of every dispatch */
  vk.mem_table = memory_type(&mp, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                             VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0);
  /* dispatches wait on shader and transfer writes only: the H200 race chose it (models 1.2-1.3x,
   * bench/results/2026-12-02-h200-vulkan-gemm.md); KILN_VULKAN_BARRIER=all waits on everything */
  const char *bar = getenv("KILN_VULKAN_BARRIER");
  vk.compute_barriers = !(bar && !strcmp(bar, "all"));
  const char *start = getenv("KILN_VULKAN_STAMP_START");
  vk.stamp_start = !start ? 0 : !strcmp(start, "top") ? 1 : !strcmp(start, "outside") ? 2 : 0;
  /* every command buffer ends with a barrier, so a schedule's first dispatch waits on nothing: in
   * a lone run after a wait nothing is left to wait on, and the barrier cost the H200's rows
   * ~1.2 us (bench/results/2026-12-03-h200-vulkan-stamp-end.md); =1 the old leading barrier */
  const char *lead = getenv("KILN_VULKAN_LEAD_BARRIER");
  vk.lead_barrier = lead && !strcmp(lead, "1");
  const char *end = getenv("KILN_VULKAN_STAMP_END");
  vk.stamp_end_compute = end && !strcmp(end, "compute");
  const char *round = getenv("KILN_VULKAN_ALLOC_ROUND");
  vk.alloc_round = round ? strtoll(round, NULL, 10) : 0;
  if (vk.alloc_round < 0 || vk.alloc_round > ((int64_t)1 << 30)) vk.alloc_round = 0;
  const char *tab = getenv("KILN_VULKAN_TABLES");  /* "host": the old place, for a race */
  if (vk.mem_table == UINT32_MAX || (tab && !strcmp(tab, "host"))) vk.mem_table = vk.mem_host;
  const char *args = getenv("KILN_VULKAN_ARGS");
  vk.args_table = (args && !strcmp(args, "table")) || vk.props.limits.maxPushConstantsSize < sizeof(VkPush);
  if (vk.mem_device == UINT32_MAX || vk.mem_host == UINT32_MAX)
    return kiln_fail(KILN_ERR_DEVICE, "vulkan: %s has no %s memory", vk.props.deviceName,
                     vk.mem_device == UINT32_MAX ? "device-local" : "host-visible coherent");
  vk.max_groups[0] = vk.props.limits.maxComputeWorkGroupCount[0];
  vk.max_groups[1] = vk.props.limits.maxComputeWorkGroupCount[1];
  vk.max_threads = vk.props.limits.maxComputeWorkGroupSize[0];
  shader_flags();
  VkPushConstantRange pr = { .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = sizeof(VkPush) };
  VkPipelineLayoutCreateInfo lc = { .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .pushConstantRangeCount = 1,
                                    .pPushConstantRanges = &pr };
  return vk_check(vk.vkCreatePipelineLayout(vk.device, &lc, NULL, &vk.layout), "vkCreatePipelineLayout", "kernels");
}

static kiln_status load_vulkan(void) {
  vk.lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!vk.lib) {
    const char *e = dlerror();
    return kiln_fail(KILN_ERR_DEVICE, "no Vulkan loader: cannot load libvulkan.so.1 (%s)", e ? e : "not found");
  }
  if (!sym(vk.lib, &vk.vkGetInstanceProcAddr, "vkGetInstanceProcAddr"))
    return kiln_fail(KILN_ERR_DEVICE, "vulkan: libvulkan.so.1 lacks vkGetInstanceProcAddr");
  PFN_vkCreateInstance create = (PFN_vkCreateInstance)vk.vkGetInstanceProcAddr(NULL, "vkCreateInstance");
  if (!create) return kiln_fail(KILN_ERR_DEVICE, "vulkan: the loader lacks vkCreateInstance");
  VkApplicationInfo app = { .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "kiln",
                            .pEngineName = "kiln", .apiVersion = VK_API_VERSION_1_2 };
  VkInstanceCreateInfo ic = { .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app };
  kiln_status st = vk_check(create(&ic, NULL, &vk.instance), "vkCreateInstance", "Vulkan 1.2");
  if (st) return st;
#define VK_LOAD_INSTANCE(name) \
  if (!(vk.name = (PFN_##name)vk.vkGetInstanceProcAddr(vk.instance, #name))) \
    return kiln_fail(KILN_ERR_DEVICE, "vulkan: the loader lacks %s", #name);
  VK_INSTANCE_FNS(VK_LOAD_INSTANCE)
#undef VK_LOAD_INSTANCE
  if ((st = pick_device()) || (st = open_device())) return st;
  return find_glslc();
}

static void load_once(void) {
  pthread_mutex_init(&vk.queue_lock, NULL);
  vk_status = load_vulkan();
  if (vk_status) snprintf(vk_why, sizeof vk_why, "%s", kiln_last_error());
}

static pthread_mutex_t pipes_lock = PTHREAD_MUTEX_INITIALIZER;

void vk_pipes_open(VkDev *v, const char *dir, bool no_cache) {
  pthread_mutex_lock(&pipes_lock);
  if (!v->pipes_tried) {
    v->pipes_tried = true;
    int n = snprintf(v->pipes_path, sizeof v->pipes_path, "%s/vk-pipelines-", dir);
    for (int i = 0; i < (int)VK_UUID_SIZE && n > 0 && (size_t)n + 3 < sizeof v->pipes_path; i++)
      n += snprintf(v->pipes_path + n, sizeof v->pipes_path - (size_t)n, "%02x", v->props.pipelineCacheUUID[i]);
    if (n <= 0 || (size_t)n + 5 >= sizeof v->pipes_path) v->pipes_path[0] = 0;
    else snprintf(v->pipes_path + n, sizeof v->pipes_path - (size_t)n, ".bin");
    size_t got = 0;
    char *data = no_cache || !v->pipes_path[0] ? NULL : rt_file_read(v->pipes_path, &got);
    VkPipelineCacheCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, .initialDataSize = data ? got : 0,
                                     .pInitialData = data };
    if (v->vkCreatePipelineCache(v->device, &ci, NULL, &v->pipes) != VK_SUCCESS) {
      ci.initialDataSize = 0, ci.pInitialData = NULL;  /* data the driver refuses: start empty */
      if (v->vkCreatePipelineCache(v->device, &ci, NULL, &v->pipes) != VK_SUCCESS) v->pipes = VK_NULL_HANDLE;
    }
    kiln_free(data);
    if (no_cache) v->pipes_path[0] = 0;  /* nothing read, nothing written */
  }
  pthread_mutex_unlock(&pipes_lock);
}

void vk_pipes_save(VkDev *v) {
  pthread_mutex_lock(&pipes_lock);
  size_t n = 0;
  if (v->pipes && v->pipes_path[0] && v->vkGetPipelineCacheData(v->device, v->pipes, &n, NULL) == VK_SUCCESS) {
    void *data = kiln_malloc(n ? n : 1);
    if (data && v->vkGetPipelineCacheData(v->device, v->pipes, &n, data) == VK_SUCCESS) rt_file_write(v->pipes_path, data, n);
    kiln_free(data);  /* a cache not written is only slower next time */
  }
  pthread_mutex_unlock(&pipes_lock);
}

kiln_status vk_device(VkDev **out) {
  pthread_once(&vk_once, load_once);
  if (vk_status) return kiln_fail(vk_status, "%s", vk_why);
  *out = &vk;
  return KILN_OK;
}

enum { PATH_N = 4200 };

/* The cache's file for kernel k of src under key h: "<dir>/vk-<hash>.<ext>". */
static void cache_path(char *out, const char *dir, const uint64_t h[2], const char *ext) {
  snprintf(out, PATH_N, "%s/vk-%016llx%016llx.%s", dir, (unsigned long long)h[0], (unsigned long long)h[1], ext);
}

/* The cache key of kernel k: the compiler, its flags and the kernel in a header line. */
static bool key_of(VkDev *v, int k, StrBuf *key) {
  sb_printf(key, "%s -fshader-stage=compute --target-env=vulkan1.2 -O", v->glslc_version);
  for (int i = 0; i < v->n_defines; i++) sb_printf(key, " %s", v->defines[i]);
  sb_printf(key, " kernel %d for %s (driver %u)\n", k, v->props.deviceName, v->props.driverVersion);
  return !key->failed;
}

/* out = dir/k<k>.<ext>; false if it does not fit (the cache folder's name is at most 4000 bytes). */
static bool kernel_file(char *out, const char *dir, int k, const char *ext) {
  int n = snprintf(out, PATH_N, "%s/k%d.%s", dir, k, ext);
  return n > 0 && n < PATH_N;
}

/* Starts glslc on dir/k<k>.comp into dir/k<k>.spv, its messages into dir/k<k>.log. */
static pid_t spawn_glslc(VkDev *v, const char *dir, int k, int *err) {
  char in[PATH_N], out[PATH_N], log[PATH_N];
  if (!kernel_file(in, dir, k, "comp") || !kernel_file(out, dir, k, "spv") || !kernel_file(log, dir, k, "log")) {
    *err = ENAMETOOLONG;
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  char *argv[16] = { v->glslc, "-fshader-stage=compute", "--target-env=vulkan1.2", "-O", "-o", out, in };
  for (int i = 0; i < v->n_defines; i++) argv[7 + i] = v->defines[i];
  pid_t pid;
  *err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  return *err ? -1 : pid;
}

/* Kernel k's own copy of src: its first line (#version) then KILN_KERNEL, then the rest. */
static bool write_kernel(const char *dir, int k, const char *src, size_t len) {
  char path[PATH_N];
  if (!kernel_file(path, dir, k, "comp")) return false;
  const char *nl = memchr(src, '\n', len);
  size_t head = nl ? (size_t)(nl - src) + 1 : len;
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(src, 1, head, f) == head && fprintf(f, "#define KILN_KERNEL %d\n", k) > 0 &&
            fwrite(src + head, 1, len - head, f) == len - head;
  return !fclose(f) && ok;
}

/* Compiles the kernels miss[0..n) in dir, at most `cpus` at a time; each k<k>.spv read into
 * spv[i]. The first failure, with its log, is the status. */
static kiln_status run_glslc(VkDev *v, const char *dir, const char *src, size_t len, const int *miss, int n, uint32_t **spv,
                             size_t *bytes) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int batch = cpus < 1 ? 1 : cpus > 16 ? 16 : (int)cpus;
  kiln_status st = KILN_OK;
  for (int at = 0; at < n && !st; at += batch) {
    pid_t pid[16];
    int started = 0;
    for (int i = at; i < n && i < at + batch && !st; i++) {
      int err = 0;
      if (!write_kernel(dir, miss[i], src, len))
        st = kiln_fail(KILN_ERR_IO, "vulkan: cannot write kernel %d's source in '%s'", miss[i], dir);
      else if ((pid[started] = spawn_glslc(v, dir, miss[i], &err)) < 0)
        st = kiln_fail(KILN_ERR_COMPILE, "vulkan: cannot start '%s': %s", v->glslc, strerror(err));
      else started++;
    }
    for (int i = 0; i < started; i++) {
      int status = 0, k = miss[at + i];
      while (waitpid(pid[i], &status, 0) < 0 && errno == EINTR) {}
      char path[PATH_N];
      size_t got = 0;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        spv[at + i] = kernel_file(path, dir, k, "spv") ? (uint32_t *)rt_file_read(path, &got) : NULL;
        bytes[at + i] = got;
        if ((!spv[at + i] || got % 4 || !got) && !st)
          st = kiln_fail(KILN_ERR_COMPILE, "vulkan: kernel kiln_k%d: glslc wrote no SPIR-V", k);
      } else if (!st) {
        char *log = kernel_file(path, dir, k, "log") ? rt_file_read(path, &got) : NULL;
        st = kiln_fail(KILN_ERR_COMPILE, "vulkan: kernel kiln_k%d: glslc failed on generated source: %.1500s", k,
                       log ? log : "(no output)");
        kiln_free(log);
      }
      static const char *const ext[] = { "comp", "spv", "log" };
      for (int e = 0; e < 3; e++)
        if (kernel_file(path, dir, k, ext[e])) unlink(path);
    }
  }
  return st;
}

kiln_status vk_compile(VkDev *v, const char *src, size_t len, const int *kernels, int n, const kiln_options *o,
                       uint32_t **spv, size_t *bytes, bool *all_hit) {
  const char *dir = o->cache_dir;
  if (!dir[0]) return kiln_fail(KILN_ERR_INVALID_ARG, "vulkan: no cache folder to compile in (options.cache_dir)");
  kiln_status st = rt_cache_folder(dir);
  if (st) return st;
  uint64_t (*h)[2] = kiln_calloc((size_t)n + 1, sizeof *h);
  int *miss = kiln_calloc((size_t)n + 1, sizeof *miss), n_miss = 0;
  uint32_t **mspv = kiln_calloc((size_t)n + 1, sizeof *mspv);
  size_t *mbytes = kiln_calloc((size_t)n + 1, sizeof *mbytes);
  StrBuf key = { 0 };
  if (!h || !miss || !mspv || !mbytes) st = kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory");
  for (int i = 0; i < n && !st; i++) {
    key.len = 0;
    if (!key_of(v, kernels[i], &key)) { st = kiln_fail(KILN_ERR_NO_MEMORY, "vulkan: out of memory"); break; }
    uint64_t h1 = hash_bytes(key.s, key.len, 1);
    h[i][0] = hash_bytes(src, len, h1), h[i][1] = hash_bytes(src, len, h1 ^ 0x9e3779b97f4a7c15ull);
    char gpath[PATH_N], spath[PATH_N];
    cache_path(gpath, dir, h[i], "comp"), cache_path(spath, dir, h[i], "spv");
    size_t sn = 0, cn = 0;
    char *stored = o->no_cache ? NULL : rt_file_read(gpath, &sn);
    bool same = stored && sn == key.len + len && !memcmp(stored, key.s, key.len) && !memcmp(stored + key.len, src, len);
    kiln_free(stored);
    if (same && (spv[i] = (uint32_t *)rt_file_read(spath, &cn)) != NULL && cn > 0 && cn % 4 == 0) {
      bytes[i] = cn;
      continue;
    }
    kiln_free(spv[i]), spv[i] = NULL;
    miss[n_miss++] = kernels[i];
  }
  *all_hit = !n_miss;
  char tmp[PATH_N];
  if (!st && n_miss) {
    snprintf(tmp, sizeof tmp, "%s/tmp-XXXXXX", dir);
    if (!mkdtemp(tmp)) st = kiln_fail(KILN_ERR_IO, "vulkan: cannot make a temporary folder in '%s': %s", dir, strerror(errno));
    else {
      st = run_glslc(v, tmp, src, len, miss, n_miss, mspv, mbytes);
      rmdir(tmp);
    }
  }
  for (int j = 0, i = 0; j < n_miss && !st; j++) {  /* into place, and into the cache */
    while (kernels[i] != miss[j]) i++;
    spv[i] = mspv[j], bytes[i] = mbytes[j], mspv[j] = NULL;
    char gpath[PATH_N], spath[PATH_N];
    cache_path(gpath, dir, h[i], "comp"), cache_path(spath, dir, h[i], "spv");
    key.len = 0;
    /* a cache that cannot be written only costs time later: not an error */
    if (key_of(v, kernels[i], &key) && (sb_puts(&key, src), !key.failed) && rt_file_write(spath, spv[i], bytes[i]))
      rt_file_write(gpath, key.s, key.len);
  }
  for (int j = 0; mspv && j < n_miss; j++) kiln_free(mspv[j]);
  sb_free(&key);
  kiln_free(h), kiln_free(miss), kiln_free(mspv), kiln_free(mbytes);
  return st;
}
#endif
