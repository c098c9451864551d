// The protobuf wire format and TFRecord framing of TensorFlow event files. Field numbers are those
// of tensorboard/compat/proto/event.proto and summary.proto and of the HParams plugin's
// plugin_data.proto (version 0); tests read the files back with TensorBoard's own loader.
#include "export/EventFile.h"

#include <array>
#include <bit>
#include <cstring>

namespace ml {

namespace {

static_assert(std::endian::native == std::endian::little, "protobuf's fixed fields are little-endian");

constexpr std::array<uint32_t, 256> crcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli polynomial
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = crcTable();

enum Wire { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// Event fields, Summary.Value fields, and the HParams plugin's messages.
enum EventField { kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5 };
enum ValueField { kTag = 1, kSimpleValue = 2, kTensor = 8, kMetadata = 9 };

// A Summary holding one value (tag, then its payload fields as written by fill).
template <class F>
std::string summaryOf(const std::string& tag, F&& fill) {
  ProtoWriter value;
  value.bytes(kTag, tag);
  fill(value);
  ProtoWriter summary;
  summary.bytes(1, value.str());
  return summary.str();
}

// The HParams plugin's metadata around its data (plugin_name "hparams", content HParamsPluginData),
// with the empty float tensor TensorBoard writes beside it.
std::string hparamsSummary(const std::string& tag, int dataField, const std::string& data) {
  ProtoWriter pluginData;  // HParamsPluginData: version 0 (field 1 omitted), then the message
  pluginData.bytes(dataField, data);
  ProtoWriter plugin;
  plugin.bytes(1, "hparams").bytes(2, pluginData.str());
  ProtoWriter metadata;
  metadata.bytes(1, plugin.str());
  ProtoWriter shape;  // TensorShapeProto with one dimension of size 0
  shape.bytes(2, "");
  ProtoWriter tensor;  // TensorProto: DT_FLOAT, shape (0,)
  tensor.varint(1, 1).bytes(2, shape.str());
  return summaryOf(tag, [&](ProtoWriter& v) { v.bytes(kTensor, tensor.str()).bytes(kMetadata, metadata.str()); });
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = kCrcTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t maskedCrc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void ProtoWriter::raw(uint64_t v) {
  while (v >= 0x80) {
    out_ += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out_ += static_cast<char>(v);
}

void ProtoWriter::key(int field, int wireType) { raw((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wireType)); }

ProtoWriter& ProtoWriter::varint(int field, uint64_t v) {
  key(field, kVarint);
  raw(v);
  return *this;
}

ProtoWriter& ProtoWriter::fixed64(int field, double v) {
  key(field, kFixed64);
  char b[8];
  std::memcpy(b, &v, 8);
  out_.append(b, 8);
  return *this;
}

ProtoWriter& ProtoWriter::fixed32(int field, float v) {
  key(field, kFixed32);
  char b[4];
  std::memcpy(b, &v, 4);
  out_.append(b, 4);
  return *this;
}

ProtoWriter& ProtoWriter::bytes(int field, std::string_view v) {
  key(field, kBytes);
  raw(v.size());
  out_.append(v);
  return *this;
}

EventFile::EventFile(double wallTime) {
  ProtoWriter e;
  e.fixed64(kWallTime, wallTime).bytes(kFileVersion, "brain.Event:2");
  record(e.str());
}

void EventFile::record(const std::string& event) {
  char len[8];
  const uint64_t n = event.size();
  std::memcpy(len, &n, 8);
  const uint32_t lenCrc = maskedCrc32c(std::string_view(len, 8)), dataCrc = maskedCrc32c(event);
  out_.append(len, 8);
  out_.append(reinterpret_cast<const char*>(&lenCrc), 4);
  out_ += event;
  out_.append(reinterpret_cast<const char*>(&dataCrc), 4);
}

void EventFile::scalar(double wallTime, int64_t step, const std::string& tag, float value) {
  ProtoWriter e;
  e.fixed64(kWallTime, wallTime).varint(kStep, static_cast<uint64_t>(step));
  e.bytes(kSummary, summaryOf(tag, [&](ProtoWriter& v) { v.fixed32(kSimpleValue, value); }));
  record(e.str());
  ++scalars_;
}

void EventFile::sessionStart(double wallTime, const std::vector<std::pair<std::string, HParamValue>>& hparams,
                             const std::string& group) {
  ProtoWriter start;  // SessionStartInfo: hparams (1, map<string, Value>), group_name (4), start_time_secs (5)
  for (const auto& [name, value] : hparams) {
    ProtoWriter v;  // google.protobuf.Value
    if (value.kind == HParamValue::Kind::Number) v.fixed64(2, value.number);
    if (value.kind == HParamValue::Kind::String) v.bytes(3, value.text);
    if (value.kind == HParamValue::Kind::Bool) v.varint(4, value.flag ? 1 : 0);
    ProtoWriter entry;
    entry.bytes(1, name).bytes(2, v.str());
    start.bytes(1, entry.str());
  }
  start.bytes(4, group).fixed64(5, wallTime);
  ProtoWriter e;
  e.fixed64(kWallTime, wallTime).varint(kStep, 0).bytes(kSummary, hparamsSummary("_hparams_/session_start_info", 3, start.str()));
  record(e.str());
}

void EventFile::sessionEnd(double wallTime, int status) {
  ProtoWriter end;  // SessionEndInfo: status (1), end_time_secs (2)
  end.varint(1, static_cast<uint64_t>(status)).fixed64(2, wallTime);
  ProtoWriter e;
  e.fixed64(kWallTime, wallTime).varint(kStep, 0).bytes(kSummary, hparamsSummary("_hparams_/session_end_info", 4, end.str()));
  record(e.str());
}

}  // namespace ml
