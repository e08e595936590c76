/*===- arc4random.c - Keeps static libstdc++ off glibc 2.36 ---------------===*
 *
 * Linked into libtfcrt and tfc-run only when they take libstdc++ statically
 * (TFC_RUNTIME_STATIC_LIBSTDCXX). GCC 12's libstdc++.a, built against glibc
 * 2.36, refers to arc4random (new in glibc 2.36) from std::random_device,
 * which the archive's string and exception code drags in although the
 * runtime never uses it. Defining it here, hidden, binds that reference
 * locally, so the binaries need glibc 2.34 rather than 2.36 (Ubuntu 22.04
 * and RHEL 9 have 2.35 and 2.34). Same contract as glibc's: 32 random bits
 * from the kernel, and the process ends if there are none.
 *===----------------------------------------------------------------------===*/

#define _DEFAULT_SOURCE /* getentropy */
#include <stdint.h>
#include <unistd.h>

void abort(void) __attribute__((noreturn));

__attribute__((visibility("hidden"))) uint32_t arc4random(void) {
  uint32_t value;
  if (getentropy(&value, sizeof(value)) != 0)
    abort();
  return value;
}
