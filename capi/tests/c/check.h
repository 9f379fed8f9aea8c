/* The checks the C test programs share: CHECK(cond) and OK(status) count and report a
 * failure with its file and line; a program prints "all checks passed" when `failures`
 * stays 0. Include after polytensor.h, once per program. */
#ifndef POLYTENSOR_TEST_CHECK_H_
#define POLYTENSOR_TEST_CHECK_H_

#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
      failures++;                                                               \
    }                                                                           \
  } while (0)
#define OK(status)                                                              \
  do {                                                                          \
    if (PT_GetCode(status) != PT_OK) {                                          \
      fprintf(stderr, "%s:%d: status %d: %s\n", __FILE__, __LINE__,             \
              PT_GetCode(status), PT_Message(status));                          \
      failures++;                                                               \
    }                                                                           \
  } while (0)

#endif
