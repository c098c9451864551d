// What machine a run ran on: CPU, cores, memory, OS and library versions, stored with every run
// so that timings can be compared fairly later.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ml {

// Keys: hostname, cpu_model, logical_cores, physical_cores, memory_bytes, os, kernel,
// mirrorlab_version, openblas, gpus (the names given). extra (e.g. {"cuda": "12.4",
// "cudnn": "9.1", "nccl": "2.21"}) is merged in last.
nlohmann::json hostInfo(const std::vector<std::string>& gpuNames = {}, const nlohmann::json& extra = nlohmann::json::object());

// This machine's host name (uname), "" when unknown.
std::string hostName();

// When process pid started (clock ticks after boot, /proc/PID/stat), 0 when unknown; with the pid
// it identifies a process even after the pid is reused. zombie: dead, not yet reaped.
int64_t processStartTicks(int64_t pid, bool* zombie = nullptr);

}  // namespace ml
