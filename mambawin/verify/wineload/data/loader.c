/* mambawin's wine loader (verify's load step): load torch_cpu.dll, then a stable extension, the
 * way torch does on Windows, and ask torch's dispatcher for each op the extension registers.
 *
 *   loader.exe TORCH_LIB STUB_DIR LIBRARY [NS::OP|OVERLOAD|KINDS ...]
 *
 * KINDS has one letter per schema argument: T a tensor (a 1-element float CPU tensor), N None (an
 * optional), b false, i 0, f 0.0. Each op is called with CPU tensors on purpose: an op whose
 * CUDA kernel is registered answers "Could not run ... with arguments from the 'CPU' backend ...
 * only available for these backends: [CUDA, ...]", one that is not answers "Could not find
 * schema"; torch 2.10 logs either to stderr, later torches keep it for torch_exception_get_what,
 * which is printed then. Every line of ours goes to stderr too (and is flushed),
 * so it stays in order with torch's.
 *
 * Only C and KERNEL32: torch's functions are found with GetProcAddress, so nothing here is linked
 * against torch and the same program serves every torch version. */
#include <windows.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef uint64_t StableIValue;
typedef int32_t (*call_dispatcher_t)(const char *, const char *, StableIValue *, uint64_t);
typedef int32_t (*empty_strided_t)(int64_t, const int64_t *, const int64_t *, int32_t, int32_t,
                                   int32_t, void **);
typedef int32_t (*constant_t)(void);
typedef const char *(*what_t)(void);

/* The torch version the stack is built for (TORCH_ABI_VERSION of 2.10: major, minor in the top
 * bytes): torch converts each StableIValue as a 2.10 extension gave it. */
#define BUILD_VERSION 0x020a000000000000ULL
#define MAX_ARGS 64

static LARGE_INTEGER frequency;

static double since(LARGE_INTEGER start) {
    LARGE_INTEGER now;
    QueryPerformanceCounter(&now);
    return (double)(now.QuadPart - start.QuadPart) / (double)frequency.QuadPart;
}

static HMODULE load(const wchar_t *path, const char *label) {
    LARGE_INTEGER start;
    HMODULE module;
    QueryPerformanceCounter(&start);
    /* torch's own __init__ on Windows: os.add_dll_directory(torch/lib), then LoadLibraryExW with
     * the default directories and the DLL's own folder. */
    module = LoadLibraryExW(path, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS |
                                            LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR);
    if (module == NULL) {
        fprintf(stderr, "mambawin-load: error %s %lu\n", label, (unsigned long)GetLastError());
    } else {
        fprintf(stderr, "mambawin-load: loaded %s %.3f\n", label, since(start));
    }
    fflush(stderr);
    return module;
}

static FARPROC need(HMODULE module, const char *name) {
    FARPROC found = GetProcAddress(module, name);
    if (found == NULL) {
        fprintf(stderr, "mambawin-load: missing torch_cpu.dll!%s\n", name);
        fflush(stderr);
    }
    return found;
}

static int call(HMODULE torch, char *spec) {
    call_dispatcher_t dispatch = (call_dispatcher_t)need(torch, "torch_call_dispatcher");
    empty_strided_t empty = (empty_strided_t)need(torch, "aoti_torch_empty_strided");
    constant_t float32 = (constant_t)need(torch, "aoti_torch_dtype_float32");
    constant_t cpu = (constant_t)need(torch, "aoti_torch_device_type_cpu");
    what_t what = (what_t)GetProcAddress(torch, "torch_exception_get_what");
    StableIValue stack[MAX_ARGS];
    char *name = spec, *overload, *kinds;
    int64_t one = 1;
    size_t i, n;
    int32_t rc;
    if (!dispatch || !empty || !float32 || !cpu) return 1;
    overload = strchr(name, '|');
    kinds = overload ? strchr(overload + 1, '|') : NULL;
    if (kinds == NULL) {
        fprintf(stderr, "mambawin-load: usage: bad op %s\n", spec);
        return 2;
    }
    *overload++ = '\0';
    *kinds++ = '\0';
    n = strlen(kinds);
    if (n > MAX_ARGS) n = MAX_ARGS;
    memset(stack, 0, sizeof stack);
    for (i = 0; i < n; i++) {
        void *tensor = NULL;
        switch (kinds[i]) {
        case 'T': /* torch takes the handle over and deletes it */
            if (empty(1, &one, &one, float32(), cpu(), 0, &tensor) != 0) return 1;
            stack[i] = (StableIValue)(uintptr_t)tensor;
            break;
        case 'f': {
            double zero = 0.0;
            memcpy(&stack[i], &zero, sizeof zero);
            break;
        }
        default: /* N (None), b (false), i (0) */
            stack[i] = 0;
        }
    }
    fprintf(stderr, "mambawin-load: op %s begin\n", name);
    fflush(stderr);
    rc = dispatch(name, overload, stack, BUILD_VERSION);
    /* torch 2.10 logs the exception to stderr; later torches keep it for
     * torch_exception_get_what() instead. */
    if (rc != 0 && what != NULL && what() != NULL) fprintf(stderr, "%s\n", what());
    fprintf(stderr, "mambawin-load: op %s end %d\n", name, (int)rc);
    fflush(stderr);
    return 0;
}

int wmain(int argc, wchar_t **argv) {
    HMODULE torch, library;
    wchar_t path[MAX_PATH * 4];
    int i;
    QueryPerformanceFrequency(&frequency);
    if (argc < 4) {
        fprintf(stderr, "mambawin-load: usage: loader TORCH_LIB STUB_DIR LIBRARY [OP ...]\n");
        return 2;
    }
    SetDefaultDllDirectories(LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
    if (!AddDllDirectory(argv[1]) || !AddDllDirectory(argv[2])) {
        fprintf(stderr, "mambawin-load: error dll-directory %lu\n", (unsigned long)GetLastError());
        return 3;
    }
    swprintf(path, sizeof path / sizeof path[0], L"%ls\\torch_cpu.dll", argv[1]);
    torch = load(path, "torch_cpu.dll");
    if (torch == NULL) return 3;
    library = load(argv[3], "library");
    if (library == NULL) return 4;
    for (i = 4; i < argc; i++) {
        char spec[1024];
        WideCharToMultiByte(CP_UTF8, 0, argv[i], -1, spec, sizeof spec, NULL, NULL);
        if (call(torch, spec) != 0) return 5;
    }
    fprintf(stderr, "mambawin-load: done\n");
    fflush(stderr);
    return 0;
}
