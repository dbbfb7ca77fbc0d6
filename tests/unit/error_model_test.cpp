// The one error model (result.hpp): an error's kind decides the exit code, and nothing else.
#include "result.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice {
namespace {

TEST(ErrorModel, ExitCodesFollowSpecSection1) {
  EXPECT_EQ(kExitOk, 0);
  EXPECT_EQ(exit_code(ErrorKind::runtime), 1);
  EXPECT_EQ(exit_code(ErrorKind::invalid_input), 2);
  EXPECT_EQ(exit_code(make_error("device gone")), 1);
  EXPECT_EQ(exit_code(invalid_input("rules.yaml:3: unknown field")), 2);
  EXPECT_EQ(exit_code(make_error("x", ErrorKind::invalid_input)), 2);
}

TEST(ErrorModel, AnErrorIsRuntimeUnlessSaidOtherwise) {
  Error e{"cannot write"};
  EXPECT_EQ(e.kind, ErrorKind::runtime);
  EXPECT_EQ(make_error("cannot write").kind, ErrorKind::runtime);
}

TEST(ErrorModel, WithKindKeepsTheMessage) {
  const Error e = with_kind(make_error("rules.yaml:7: rate must be positive"), ErrorKind::invalid_input);
  EXPECT_EQ(e.kind, ErrorKind::invalid_input);
  EXPECT_EQ(e.message, "rules.yaml:7: rate must be positive");
  EXPECT_EQ(with_kind(e, ErrorKind::runtime).kind, ErrorKind::runtime);
}

TEST(ErrorModel, ResultCarriesTheKindThroughAStatus) {
  auto fails = []() -> Status { return invalid_input("--flows 0: must be positive"); };
  Status s = fails();
  ASSERT_FALSE(s);
  EXPECT_EQ(exit_code(s.error()), 2);
  Result<int> r = 7;
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 7);
}

}  // namespace
}  // namespace sluice
