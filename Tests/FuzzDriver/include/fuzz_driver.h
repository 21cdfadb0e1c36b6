#ifndef HTTPDNS_FUZZ_DRIVER_H
#define HTTPDNS_FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer's driver (LLVMFuzzerRunDriver) with the process's arguments and `callback` as the target.
/// Returns -1 when the binary was not built with `-sanitize=fuzzer` (the driver is then absent).
int httpdns_fuzz_run_driver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
