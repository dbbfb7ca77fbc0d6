// Which sanitizer this translation unit is built with, for the few places where a sanitizer's
// runtime changes what is safe to do. SLUICE_TSAN: ThreadSanitizer (g++ and clang spell the
// check differently).
#pragma once

#if defined(__SANITIZE_THREAD__)
#define SLUICE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE_TSAN 1
#endif
#endif
