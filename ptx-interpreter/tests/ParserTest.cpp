//===- ParserTest.cpp - What a module that does not load reports ----------===//
//
// A module the interpreter cannot run is refused when it loads, with one
// line that names the PTX line and what is wrong with it; a module that
// loads has its kernels by name.
//
//===----------------------------------------------------------------------===//

#include "Harness.h"

#include <gtest/gtest.h>

#include <string>

using namespace ptxi::test;

namespace {

/// Loads `text` as it is (no header) and returns the error message.
std::string loadError(const std::string &text) {
  char message[512] = "";
  ptxemu_module *module = ptxemu_load(text.c_str(), message, sizeof message);
  EXPECT_EQ(module, nullptr) << "loaded: " << text;
  ptxemu_unload(module);
  return message;
}

// The module header takes lines 1-3, the body's opening newline line 4.
TEST(Parser, AnUnsupportedInstructionNamesItsLine) {
  PtxModule module(R"(
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<4>;
  mov.u32 %r1, %tid.x;
  frobnicate.sync.u32 %r2, %r1;
  ret;
}
)");
  EXPECT_FALSE(module.loaded());
  EXPECT_EQ(module.error(),
            "line 9: unsupported PTX instruction 'frobnicate.sync.u32'");
}

TEST(Parser, AnUnsupportedModifierNamesItsLine) {
  PtxModule module(R"(
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<4>;
  add.cc.u32 %r2, %r1, 1;
  ret;
}
)");
  EXPECT_FALSE(module.loaded());
  EXPECT_EQ(module.error(), "line 8: unsupported modifier '.cc' of add");
}

TEST(Parser, ABranchToAnUnknownLabelNamesIt) {
  PtxModule module(R"(
.visible .entry k(.param .u64 p)
{
  bra.uni NOWHERE;
  ret;
}
)");
  EXPECT_FALSE(module.loaded());
  EXPECT_EQ(module.error(), "line 7: unknown label 'NOWHERE'");
}

TEST(Parser, DeviceFunctionsAreRefused) {
  PtxModule module(R"(
.func helper()
{
  ret;
}
)");
  EXPECT_FALSE(module.loaded());
  EXPECT_EQ(module.error(),
            "line 5: device functions (.func) are not supported");
}

TEST(Parser, TextWithoutAVersionIsNotAModule) {
  EXPECT_EQ(loadError(""), "not a PTX module (no .version)");
  EXPECT_EQ(loadError(".visible .entry k()\n{\n  ret;\n}\n"),
            "line 1: not a PTX module (no .version)");
  EXPECT_EQ(loadError("\n\nhello world;\n"),
            "line 3: unexpected 'hello world'");
}

TEST(Parser, KernelsAreFoundByName) {
  PtxModule module(R"(
.visible .entry first(.param .u64 p)
{
  ret;
}
.visible .entry second(.param .u64 p, .param .u32 n)
{
  ret;
}
)");
  ASSERT_TRUE(module.loaded()) << module.error();
  EXPECT_NE(module.kernel("first"), nullptr);
  EXPECT_NE(module.kernel("second"), nullptr);
  EXPECT_NE(module.kernel("first"), module.kernel("second"));
  EXPECT_EQ(module.kernel("third"), nullptr);
  EXPECT_EQ(module.kernel(nullptr), nullptr);
}

} // namespace
