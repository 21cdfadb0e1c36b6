#include "fuzz_driver.h"

// libFuzzer's entry for programs that keep their own main (as SwiftPM's executables do). Weak, so that the normal
// build, which does not link libFuzzer, still links: the symbol is then null.
extern int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size))
    __attribute__((weak));

int httpdns_fuzz_run_driver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size)) {
    if (LLVMFuzzerRunDriver == NULL) return -1;
    return LLVMFuzzerRunDriver(argc, argv, callback);
}
