#include "fuzz_driver.h"

// libFuzzer's entry for programs that keep their own main (as SwiftPM's executables do). Weak, so that the normal
// build, which does not link libFuzzer, still links: the symbol is then null.
extern int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size))
    __attribute__((weak));

int httpdns_fuzz_run_driver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size)) {
    if (LLVMFuzzerRunDriver == NULL) return -1;
    return LLVMFuzzerRunDriver(argc, argv, callback);
}

// libFuzzer's own entry point, for a build whose main is libFuzzer's rather than the program's (SwiftPM renames an
// executable's entry point in debug builds, so linking libFuzzer there brings its main): the input goes to the same
// Swift target (FuzzEntry.swift), whichever main runs. Weak, so that a build without it still links.
extern int httpdns_fuzz_one(const uint8_t *data, size_t size) __attribute__((weak));

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return httpdns_fuzz_one ? httpdns_fuzz_one(data, size) : 0;
}
