// Telemetry events as JSON, one line each, so that a run in another process can be followed as it
// happens: worker 1 of a multi-worker run writes its events (mirrorlab-cli train --events PATH)
// and the studio, which started the workers, reads them into its own hub. Every field travels.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "telemetry/Events.h"

namespace ml {

nlohmann::json eventToJson(const Event& e);
// Throws std::runtime_error (nlohmann's errors included) for a line that is not an event.
Event eventFromJson(const nlohmann::json& j);

// The line that ends an events file of a recorded run: {"type": "recorded", "run": 12}.
nlohmann::json recordedRunLine(int64_t runId);
// The stored run's id when `j` is that line; nullopt for any other.
std::optional<int64_t> recordedRunIn(const nlohmann::json& j);

}  // namespace ml
