// TensorFlow event files as TensorBoard reads them, without TensorFlow: Event protocol buffers
// (hand-encoded: the few fields a scalar summary and the HParams plugin use) framed as TFRecords
// (length, masked CRC-32C of the length, data, masked CRC-32C of the data).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ml {

// CRC-32C (Castagnoli), and TFRecord's masked form of it.
uint32_t crc32c(std::string_view data);
uint32_t maskedCrc32c(std::string_view data);

// A protocol buffer message being written, field by field (proto3 wire format).
class ProtoWriter {
 public:
  ProtoWriter& varint(int field, uint64_t v);
  ProtoWriter& fixed64(int field, double v);          // double
  ProtoWriter& fixed32(int field, float v);           // float
  ProtoWriter& bytes(int field, std::string_view v);  // string, bytes, embedded message
  const std::string& str() const { return out_; }

 private:
  void key(int field, int wireType);
  void raw(uint64_t v);
  std::string out_;
};

// A value of the HParams plugin (google.protobuf.Value: number, string or bool).
struct HParamValue {
  enum class Kind { Number, String, Bool } kind = Kind::Number;
  double number = 0;
  std::string text;
  bool flag = false;
};

// One event file's records, in order; bytes() is the file (the first record says "brain.Event:2").
class EventFile {
 public:
  explicit EventFile(double wallTime);
  void scalar(double wallTime, int64_t step, const std::string& tag, float value);
  // The HParams plugin's session start (hyper-parameters, group name, start time) and end (status:
  // 1 success, 2 failure, 3 running, 0 unknown).
  void sessionStart(double wallTime, const std::vector<std::pair<std::string, HParamValue>>& hparams, const std::string& group);
  void sessionEnd(double wallTime, int status);
  const std::string& bytes() const { return out_; }
  int64_t scalars() const { return scalars_; }

 private:
  void record(const std::string& event);
  std::string out_;
  int64_t scalars_ = 0;
};

}  // namespace ml
