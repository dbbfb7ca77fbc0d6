// Which sanitizer this translation unit is built with, for the few places where a sanitizer's
// runtime changes what is safe to do (or what memory a test may expect). SLUICE_TSAN:
// ThreadSanitizer, SLUICE_ASAN: AddressSanitizer (g++ and clang spell the checks differently).
#pragma once

#if defined(__SANITIZE_THREAD__)
#define SLUICE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE_TSAN 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define SLUICE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLUICE_ASAN 1
#endif
#endif
