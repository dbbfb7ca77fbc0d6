// Output files (--out, --report, config save): written to an unpredictable temporary with
// O_EXCL and renamed on commit, mode from the umask or the replaced file; device nodes and
// FIFOs written in place and left what they are; links to files, directories and block
// devices refused; an output that is the same file as an input or another output refused.
// Device nodes are our own (mknod in a temporary directory, root only), never /dev/null.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "output_file.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sluice-out-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Everything in the directory: no temporary may be left behind.
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir_)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }
  // A character device of our own with /dev/null's numbers (1, 3): writes vanish.
  std::string make_null_device(const std::string& name) {
    const std::string p = path(name);
    if (geteuid() != 0 || mknod(p.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) return "";
    return p;
  }
  fs::path dir_;
};

TEST_F(OutputFileTest, NewFileIsWholeWithTheUmasksModeAndNothingElseIsLeft) {
  const mode_t old = umask(027);
  Status s = write_file_atomically(path("r.json"), "{\"a\": 1}\n");
  umask(old);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(slurp(path("r.json")), "{\"a\": 1}\n");
  struct stat st{};
  ASSERT_EQ(stat(path("r.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(entries(), std::vector<std::string>{"r.json"});
}

TEST_F(OutputFileTest, ReplacingAFileKeepsItsModeAndAFailedRunKeepsTheOldContent) {
  spit(path("r.json"), "old");
  ASSERT_EQ(chmod(path("r.json").c_str(), 0604), 0);
  {
    auto out = OutputFile::open(path("r.json"));
    ASSERT_TRUE(out) << out.error().message;
    EXPECT_FALSE((*out)->in_place());
    auto f = (*out)->open_stream();
    ASSERT_TRUE(f);
    std::fputs("half", *f);
    std::fclose(*f);
    // No commit: the run failed.
  }
  EXPECT_EQ(slurp(path("r.json")), "old");
  EXPECT_EQ(entries(), std::vector<std::string>{"r.json"});
  ASSERT_TRUE(write_file_atomically(path("r.json"), "new"));
  EXPECT_EQ(slurp(path("r.json")), "new");
  struct stat st{};
  ASSERT_EQ(stat(path("r.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0604u);
}

TEST_F(OutputFileTest, ThePredictableTemporaryNameOfOldIsNotFollowed) {
  // What an attacker who can write the directory planted for the old FINAL.tmp.PID scheme.
  spit(path("victim"), "precious");
  ASSERT_EQ(symlink(path("victim").c_str(), (path("r.json") + ".tmp." + std::to_string(getpid())).c_str()), 0);
  ASSERT_TRUE(write_file_atomically(path("r.json"), "report"));
  EXPECT_EQ(slurp(path("victim")), "precious");
  EXPECT_EQ(slurp(path("r.json")), "report");
  // The temporary is created O_EXCL | O_NOFOLLOW: nothing planted can stand in for it.
  auto out = OutputFile::open(path("x"));
  ASSERT_TRUE(out);
  std::vector<std::string> names = entries();
  const auto temp = std::find_if(names.begin(), names.end(),
                                 [](const std::string& n) { return n.rfind(".x.tmp-", 0) == 0; });
  ASSERT_NE(temp, names.end());
  EXPECT_EQ(temp->size(), std::string(".x.tmp-").size() + 16);  // 64 random bits in hex
}

TEST_F(OutputFileTest, ACharacterDeviceIsWrittenInPlaceAndStaysADevice) {
  const std::string dev = make_null_device("null");
  if (dev.empty()) GTEST_SKIP() << "needs root for mknod";
  ASSERT_TRUE(check_outputs({}, {{"--out", dev}}));
  ASSERT_TRUE(write_file_atomically(dev, "gone"));
  struct stat st{};
  ASSERT_EQ(lstat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  // Through a symbolic link: the device is written, the link stays a link.
  ASSERT_EQ(symlink(dev.c_str(), path("link").c_str()), 0);
  ASSERT_TRUE(write_file_atomically(path("link"), "gone"));
  ASSERT_EQ(lstat(path("link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(entries(), (std::vector<std::string>{"link", "null"}));
}

TEST_F(OutputFileTest, AFifoIsWrittenInPlace) {
  ASSERT_EQ(mkfifo(path("pipe").c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(path("pipe")); });
  Status s = write_file_atomically(path("pipe"), "through the pipe");
  reader.join();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(got, "through the pipe");
  struct stat st{};
  ASSERT_EQ(lstat(path("pipe").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(OutputFileTest, DescriptorPathsWriteToThatDescriptor) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string alias = "/proc/self/fd/" + std::to_string(fds[1]);
  ASSERT_TRUE(write_file_atomically(alias, "on fd"));
  close(fds[1]);
  char buf[16] = {};
  EXPECT_EQ(read(fds[0], buf, sizeof buf), 5);
  EXPECT_STREQ(buf, "on fd");
  close(fds[0]);
  EXPECT_FALSE(write_file_atomically("/dev/fd/987654", "x"));  // not open
}

TEST_F(OutputFileTest, LinksToFilesDirectoriesAndBlockDevicesAreRefusedAndUntouched) {
  spit(path("target"), "keep");
  ASSERT_EQ(symlink(path("target").c_str(), path("link").c_str()), 0);
  ASSERT_EQ(symlink(path("nowhere").c_str(), path("dangling").c_str()), 0);
  fs::create_directory(path("dir"));
  std::vector<std::pair<std::string, std::string>> refused = {
      {path("link"), "symbolic link (to " + path("target") + ")"},
      {path("dangling"), "symbolic link"},
      {path("dir"), "is a directory"}};
  if (geteuid() == 0 && mknod(path("blk").c_str(), S_IFBLK | 0600, makedev(7, 250)) == 0)
    refused.push_back({path("blk"), "block device"});
  for (const auto& [p, why] : refused) {
    SCOPED_TRACE(p);
    Status check = check_outputs({}, {{"--report", p}});
    ASSERT_FALSE(check);
    EXPECT_NE(check.error().message.find("--report " + p + ": "), std::string::npos) << check.error().message;
    EXPECT_NE(check.error().message.find(why), std::string::npos) << check.error().message;
    Status write = write_file_atomically(p, "x");
    ASSERT_FALSE(write);
    EXPECT_NE(write.error().message.find(why), std::string::npos) << write.error().message;
  }
  EXPECT_EQ(slurp(path("target")), "keep");
  EXPECT_EQ(fs::read_symlink(path("link")), path("target"));
  EXPECT_FALSE(fs::exists(path("nowhere")));
  EXPECT_TRUE(fs::is_directory(path("dir")));
}

TEST_F(OutputFileTest, AnOutputThatIsAnInputOrAnotherOutputIsRefused) {
  spit(path("in.pcap"), "capture");
  ASSERT_EQ(link(path("in.pcap").c_str(), path("hard").c_str()), 0);
  const std::vector<NamedPath> inputs = {{"--replay", path("in.pcap")}, {"--config", path("r.yaml")}};
  spit(path("r.yaml"), "rules");
  // Same inode, however it is spelt.
  for (const std::string& out : {path("in.pcap"), path("hard"), dir_.string() + "/./in.pcap"}) {
    Status s = check_outputs(inputs, {{"--out", out}, {"--report", path("ok.json")}});
    ASSERT_FALSE(s) << out;
    EXPECT_EQ(s.error().message, "--out " + out + " is the same file as --replay " + path("in.pcap") +
                                     ": refusing to overwrite an input");
  }
  Status s = check_outputs(inputs, {{"--out", path("o.pcap")}, {"--report", path("r.yaml")}});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("--report " + path("r.yaml") + " is the same file as --config"),
            std::string::npos);
  // Two outputs that do not exist yet: the same normalised path.
  fs::create_directory(path("sub"));
  s = check_outputs(inputs, {{"--out", path("x")}, {"--report", path("sub/../x")}});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "--out " + path("x") + " and --report " + path("sub/../x") +
                                   " are the same file: refusing to write both to it");
  EXPECT_TRUE(check_outputs(inputs, {{"--out", path("x")}, {"--report", path("y")}}));
  // Nothing was written by the checks.
  EXPECT_EQ(slurp(path("in.pcap")), "capture");
  EXPECT_FALSE(fs::exists(path("x")));
}

TEST_F(OutputFileTest, BothOutputsMayGoToOneCharacterDevice) {
  const std::string dev = make_null_device("null");
  if (dev.empty()) GTEST_SKIP() << "needs root for mknod";
  EXPECT_TRUE(check_outputs({{"--config", path("r.yaml")}}, {{"--out", dev}, {"--report", dev}}));
}

}  // namespace
}  // namespace sluice
