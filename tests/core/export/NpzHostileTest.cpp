// The .npz/.npy reader against damaged and hostile files: a shape without ')', sizes past any
// array, headers and zip records pointing outside the file, a deflate entry claiming gigabytes,
// NaN weights. Each ends in a UserError naming the problem (no crash, no std::bad_alloc, no
// std::out_of_range), and every prefix and every one-byte change of a valid archive does too.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "Error.h"
#include "NnTestUtil.h"
#include "export/NpzFile.h"
#include "export/WeightsNpz.h"
#include "nn/Sequential.h"

using namespace ml;

namespace {

void put16(std::string& s, uint32_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

// A .npy file with this header dict, padded as numpy pads it, followed by data.
std::string npy(const std::string& dict, const std::string& data) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  put16(out, static_cast<uint32_t>(h.size()));
  return out + h + data;
}

// A zip of one stored entry with a correct CRC: the reader reaches the .npy inside. method and
// usize let a test claim what it likes about the entry.
std::string zipOf(const std::string& name, const std::string& body, uint16_t method = 0,
                  std::optional<uint32_t> usize = std::nullopt) {
  const uint32_t crc =
      static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())));
  auto common = [&](std::string& s) {
    put16(s, 20);
    put16(s, 0);
    put16(s, method);
    put16(s, 0);
    put16(s, 33);
    put32(s, crc);
    put32(s, static_cast<uint32_t>(body.size()));
    put32(s, usize.value_or(static_cast<uint32_t>(body.size())));
    put16(s, static_cast<uint32_t>(name.size()));
    put16(s, 0);
  };
  std::string zip, central;
  put32(zip, 0x04034b50);
  common(zip);
  zip += name + body;
  put32(central, 0x02014b50);
  put16(central, 20);
  common(central);
  for (int i = 0; i < 3; ++i) put16(central, 0);  // comment length, disk, internal attributes
  put32(central, 0);                              // external attributes
  put32(central, 0);                              // the local header's offset
  central += name;
  const uint32_t at = static_cast<uint32_t>(zip.size());
  zip += central;
  put32(zip, 0x06054b50);
  put16(zip, 0);
  put16(zip, 0);
  put16(zip, 1);
  put16(zip, 1);
  put32(zip, static_cast<uint32_t>(central.size()));
  put32(zip, at);
  put16(zip, 0);
  return zip;
}

// A private folder in memory where there is one: the tests below write a few thousand small files.
class ShmDir {
 public:
  ShmDir() {
    std::string base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    std::string templ = base + "/mirrorlab-npz-XXXXXX";
    if (::mkdtemp(templ.data())) path_ = templ;
  }
  ~ShmDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

class NpzHostile : public ::testing::Test {
 protected:
  ShmDir dir_;
  Sequential model_{test::modelSpec({3}, {test::dense(4, "relu"), test::dense(2, "linear")})};

  std::string file(const std::string& bytes) {
    const std::string p = (dir_.path() / "x.npz").string();
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
    return p;
  }
  // The refusal of reading these bytes as an archive into the model ("accepted" when none);
  // anything but a UserError escapes and fails the test.
  std::string archiveError(const std::string& bytes) {
    try {
      loadWeightsNpz(model_, file(bytes));
    } catch (const UserError& e) {
      return e.what();
    }
    return "accepted";
  }
  static std::string npyError(const std::string& bytes) {
    try {
      (void)readNpy(bytes, "a", "array 'a'");
    } catch (const UserError& e) {
      return e.what();
    }
    return "accepted";
  }
  std::string validArchive(NpzCompression c) {
    model_.initialize(3);
    const std::string p = (dir_.path() / "valid.npz").string();
    writeNpz(p, weightArrays(model_), c);
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

TEST_F(NpzHostile, ShapeWithoutClosingParenthesisIsRefused) {
  // The crash (SIGSEGV): the parser ran past the header looking for ')'.
  const std::string a = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2", std::string(16, '\0'));
  EXPECT_NE(npyError(a).find("'shape' has no closing ')'"), std::string::npos) << npyError(a);
  EXPECT_NE(archiveError(zipOf("dense/kernel.npy", a)).find("'shape' has no closing ')'"), std::string::npos);
  // Other broken dicts: no value after a key, an unquoted descr, a shape that is not a tuple.
  EXPECT_NE(npyError(npy("{'descr':", "")).find("damaged .npy header"), std::string::npos);
  EXPECT_NE(npyError(npy("{'descr': <f4, 'fortran_order': False, 'shape': (1,)}", "abcd")).find("not a quoted text"),
            std::string::npos);
  EXPECT_NE(npyError(npy("{'descr': '<f4', 'fortran_order': False, 'shape': 4}", "abcd")).find("not a tuple"), std::string::npos);
  EXPECT_NE(npyError(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1x,)}", "abcd")).find("not sizes"),
            std::string::npos);
}

TEST_F(NpzHostile, SizesPastAnyArrayAreRefusedBeforeAllocating) {
  const std::string d = "{'descr': '<f4', 'fortran_order': False, 'shape': ";
  // Twenty digits overflowed std::stoll ("error: stoll"); 2^62 values made a vector of 16 EiB.
  EXPECT_NE(npyError(npy(d + "(99999999999999999999, 64), }", "")).find("larger than any array"), std::string::npos);
  EXPECT_NE(npyError(npy(d + "(4611686018427387904,), }", "")).find("needs more than any file holds"), std::string::npos);
  EXPECT_NE(npyError(npy(d + "(2147483648, 2147483648, 2147483648), }", "")).find("needs more than any file holds"),
            std::string::npos);
  // A shape the data does not fill: the message gives both sizes.
  EXPECT_NE(
      npyError(npy(d + "(1000000,), }", std::string(8, '\0'))).find("holds 8 data bytes, but its shape (1000000,) needs 4000000"),
      std::string::npos);
  // A header length past the end.
  std::string cut = npy(d + "(1,), }", "abcd");
  cut[8] = '\xff';
  cut[9] = '\x7f';
  EXPECT_NE(npyError(cut).find("header runs past the end"), std::string::npos);
  EXPECT_NE(npyError(std::string("\x93NUMPY\x09\x00", 8) + "xxxx").find("format version 9"), std::string::npos);
}

TEST_F(NpzHostile, ZipRecordsPointingOutsideTheFileAreRefused) {
  const std::string body = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", std::string(48, '\0'));
  const std::string good = zipOf("dense/kernel.npy", body);
  // The central directory's offset (the end record's last field but the comment length).
  std::string z = good;
  z[z.size() - 6] = '\xf0';
  z[z.size() - 3] = '\x7f';
  EXPECT_NE(archiveError(z).find("damaged (central directory)"), std::string::npos) << archiveError(z);
  // The entry's name length, far past the file.
  const size_t central = good.size() - 22 - 46 - std::string("dense/kernel.npy").size();
  z = good;
  z[central + 28] = '\xff';
  z[central + 29] = '\xff';
  EXPECT_NE(archiveError(z).find("central directory runs past the end"), std::string::npos) << archiveError(z);
  // The local header's offset.
  z = good;
  z[central + 45] = '\x7f';
  EXPECT_NE(archiveError(z).find("damaged (local header)"), std::string::npos) << archiveError(z);
  // A compressed size past the end.
  z = good;
  z[central + 23] = '\x7f';
  EXPECT_NE(archiveError(z).find("is truncated"), std::string::npos) << archiveError(z);
  // A deflated entry claiming 4 GiB from a few bytes (a zip bomb, or damage): refused before inflating.
  const std::string bomb = zipOf("dense/kernel.npy", std::string(20, '\x03'), 8, 0xfffffff0u);
  EXPECT_NE(archiveError(bomb).find("bytes from 20 compressed ones"), std::string::npos) << archiveError(bomb);
}

TEST_F(NpzHostile, EveryPrefixAndEveryByteChangeEndsInAMessage) {
  for (NpzCompression c : {NpzCompression::Stored, NpzCompression::Deflated}) {
    const std::string good = validArchive(c);
    ASSERT_EQ(archiveError(good), "accepted");
    int refused = 0;
    for (size_t n = 0; n < good.size(); ++n) refused += archiveError(good.substr(0, n)) != "accepted";
    EXPECT_EQ(refused, static_cast<int>(good.size())) << "every cut archive is refused";
    // Every byte set to 0xff (stored) or 0x00 (deflated): accepted (a padding or time byte) or
    // refused naming the file; nothing else escapes.
    for (size_t i = 0; i < good.size(); ++i) {
      std::string z = good;
      z[i] = c == NpzCompression::Stored ? '\xff' : '\0';
      const std::string msg = archiveError(z);
      EXPECT_TRUE(msg == "accepted" || msg.find("x.npz") != std::string::npos) << "byte " << i << ": " << msg;
    }
  }
}

TEST_F(NpzHostile, NanAndInfiniteWeightsAreRefusedNamingTheArray) {
  model_.initialize(1);
  const uint64_t before = model_.checksum();
  auto arrays = weightArrays(model_);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto a = arrays;
    a[2].data[1] = bad;  // dense_1/kernel, its second value
    const std::string p = (dir_.path() / "nan.npz").string();
    writeNpz(p, a);
    std::ifstream in(p, std::ios::binary);
    const std::string msg = archiveError(std::string(std::istreambuf_iterator<char>(in), {}));
    EXPECT_NE(msg.find("array '" + a[2].name + "' in npz file"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::isnan(bad) ? "holds NaN (value 2 of its 8)" : "holds +inf (value 2 of its 8)"), std::string::npos)
        << msg;
    EXPECT_EQ(model_.checksum(), before) << "a refused file leaves the model as it was";
  }
  // Writing them is refused too, and leaves no file.
  model_.params()[5] = std::numeric_limits<float>::quiet_NaN();
  const std::string out = (dir_.path() / "out.npz").string();
  try {
    saveWeightsNpz(model_, out);
    FAIL() << "NaN weights were written";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("NaN in layer 1 'dense' (Dense), value 6 of its 16"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
