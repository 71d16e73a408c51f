// Preloaded into the worker only when scripts/callgrind.sh runs it under valgrind.
//
// valgrind 3.19 (Debian 12) removes its own signal from the mask that a program passes to
// sigsuspend by writing into that mask. libdispatch's main thread (dispatchMain) passes a mask
// that lives in read-only memory, so valgrind faults on it and aborts ("the 'impossible'
// happened", SIGSEGV at _dispatch_sigsuspend.mask). Handing sigsuspend a copy on the stack
// changes nothing else: the same signals stay blocked while it waits.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>

int sigsuspend(const sigset_t *mask) {
    static int (*next)(const sigset_t *);
    if (next == NULL) {
        next = (int (*)(const sigset_t *))dlsym(RTLD_NEXT, "sigsuspend");
    }
    sigset_t copy = *mask;
    return next(&copy);
}
