// TensorFlow event files without TensorFlow: CRC-32C against the published check values, the
// protobuf wire format against the protobuf documentation's examples, and the TFRecord framing
// read back record by record. (TensorBoard itself reads the files in cli.export_references.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "export/EventFile.h"

using namespace ml;

namespace {

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

uint32_t u32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

}  // namespace

TEST(EventFile, Crc32cCheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);              // the CRC catalogue's check value
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);    // RFC 3720, B.4: 32 bytes of zeros
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);  // RFC 3720, B.4: 32 bytes of ones
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(maskedCrc32c("123456789"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(EventFile, ProtobufWireFormatAsDocumented) {
  ProtoWriter a;
  a.varint(1, 150);  // protobuf's encoding guide: field 1 = 150 is 08 96 01
  EXPECT_EQ(hex(a.str()), "089601");
  ProtoWriter b;
  b.bytes(2, "testing");  // field 2 = "testing" is 12 07 74 65 73 74 69 6e 67
  EXPECT_EQ(hex(b.str()), "120774657374696e67");
  ProtoWriter c;
  c.fixed32(2, 1.0f).fixed64(1, 1.0);  // float 1.0 = 0x3f800000, double 1.0 = 0x3ff0000000000000, little-endian
  EXPECT_EQ(hex(c.str()), "150000803f09000000000000f03f");
}

TEST(EventFile, RecordsAreFramedWithMaskedCrcs) {
  EventFile f(1700000000.5);
  f.scalar(1700000001.0, 1, "step/loss", 2.5f);
  f.scalar(1700000002.0, 2, "step/loss", 1.5f);
  f.sessionStart(1700000000.5, {{"lr", HParamValue{HParamValue::Kind::Number, 0.01, {}, false}}}, "run-1");
  f.sessionEnd(1700000003.0, 1);
  EXPECT_EQ(f.scalars(), 2);
  const std::string& s = f.bytes();
  size_t at = 0;
  int records = 0;
  while (at < s.size()) {
    ASSERT_LE(at + 12, s.size());
    uint64_t len;
    std::memcpy(&len, s.data() + at, 8);
    EXPECT_EQ(u32(s, at + 8), maskedCrc32c(s.substr(at, 8))) << "record " << records;
    ASSERT_LE(at + 12 + len + 4, s.size());
    const std::string data = s.substr(at + 12, len);
    EXPECT_EQ(u32(s, at + 12 + len), maskedCrc32c(data)) << "record " << records;
    const char* holds[] = {"brain.Event:2", "step/loss", "step/loss", "_hparams_/session_start_info",
                           "_hparams_/session_end_info"};
    if (records < 5) {
      EXPECT_NE(data.find(holds[records]), std::string::npos) << "record " << records;
    }
    at += 12 + len + 4;
    ++records;
  }
  EXPECT_EQ(at, s.size());
  EXPECT_EQ(records, 5);  // the version, two scalars, the session's start and end
}
