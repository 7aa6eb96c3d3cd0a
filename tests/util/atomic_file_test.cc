// lib/util/atomic_file: outputs appear whole or not at all, and write errors are reported.
#include "lib/util/atomic_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace memsim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Each test's files go to a directory of its own, removed after the test.
class AtomicFileTest : public ::testing::Test {
 protected:
  std::string TempDir() {
    fs::create_directories(dir_);
    return dir_.string();
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }

 private:
  const fs::path dir_ = fs::path(MEMSIM_BINARY_DIR) / ("atomic_file_test_" + std::to_string(::getpid()));
};

std::string ReadAll(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(AtomicFileTest, CommitReplacesTheDestinationWhole) {
  const std::string path = TempDir() + "/out.json";
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  auto w = AtomicFileWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(w->Write("new ").ok());
  EXPECT_EQ(ReadAll(path), "old");  // nothing visible before Commit
  ASSERT_TRUE(w->Write("content").ok());
  ASSERT_TRUE(w->Commit().ok());
  EXPECT_EQ(ReadAll(path), "new content");
  EXPECT_FALSE(fs::exists(w->temp_path()));
}

TEST_F(AtomicFileTest, AbandonedWriterLeavesNoFile) {
  const std::string path = TempDir() + "/abandoned.json";
  std::string temp;
  {
    auto w = AtomicFileWriter::Open(path);
    ASSERT_TRUE(w.ok());
    temp = w->temp_path();
    ASSERT_TRUE(w->Write("half").ok());
    EXPECT_TRUE(fs::exists(temp));
  }
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(AtomicFileTest, UnwritableDirectoryIsAnError) {
  auto w = AtomicFileWriter::Open("/nonexistent-dir/out.json");
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("/nonexistent-dir/out.json"));
}

TEST_F(AtomicFileTest, FullDiskIsAWriteError) {
  if (!fs::exists("/dev/full")) GTEST_FAIL() << "/dev/full is part of every Linux system";
  std::FILE* full = std::fopen("/dev/full", "w");
  ASSERT_NE(full, nullptr);
  Status s = WriteStdout(std::string(1 << 16, 'x'), full);
  std::fclose(full);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("standard output: write failed"));
  EXPECT_THAT(s.message(), HasSubstr("No space left"));
}

TEST_F(AtomicFileTest, ADirectoryIsRefusedAndKept) {
  const std::string dir = TempDir() + "/is_a_dir";
  fs::create_directories(dir + "/inner");
  Status s = WriteFileAtomic(dir, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("is_a_dir: is a directory"));
  EXPECT_TRUE(fs::is_directory(dir + "/inner"));
}

// Note [Output destinations]: one rule for every output file.
TEST_F(AtomicFileTest, ASymlinkIsFollowedAndKept) {
  const std::string dir = TempDir();
  { std::ofstream(dir + "/target.txt") << "old"; }
  fs::create_symlink("target.txt", dir + "/link.txt");
  ASSERT_TRUE(WriteFileAtomic(dir + "/link.txt", "new").ok());
  EXPECT_TRUE(fs::is_symlink(dir + "/link.txt"));
  EXPECT_EQ(ReadAll(dir + "/target.txt"), "new");
  // A dangling link names the file to create.
  fs::create_symlink("sub/../made.txt", dir + "/dangling.txt");
  fs::create_directories(dir + "/sub");
  ASSERT_TRUE(WriteFileAtomic(dir + "/dangling.txt", "made").ok());
  EXPECT_EQ(ReadAll(dir + "/made.txt"), "made");
  EXPECT_TRUE(fs::is_symlink(dir + "/dangling.txt"));
  auto target = OutputTarget(dir + "/link.txt");
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(*target, fs::canonical(dir + "/target.txt").string());
}

TEST_F(AtomicFileTest, ADeviceIsWrittenInPlace) {
  ASSERT_TRUE(WriteFileAtomic("/dev/null", "discarded").ok());
  // /dev/stdout is a link to /proc/self/fd/1, whose target ("pipe:[N]", "/dev/pts/0") is not a
  // path to create: written in place.
  auto out = OutputTarget("/dev/stdout");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "/dev/stdout");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  Status full = WriteFileAtomic("/dev/full", std::string(1 << 16, 'x'));
  EXPECT_FALSE(full.ok());
}

TEST_F(AtomicFileTest, ASymlinkLoopIsAnError) {
  const std::string dir = TempDir();
  fs::create_symlink("b", dir + "/a");
  fs::create_symlink("a", dir + "/b");
  Status s = WriteFileAtomic(dir + "/a", "x");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("too many levels of symbolic links"));
}

}  // namespace
}  // namespace memsim
