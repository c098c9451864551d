// Records one run into a store through the Recorder, as rank 0 of a multi-worker training does:
// `write_workers_run DB WORKERS` writes 4 replicas (WORKERS of 2 or 1 worker), 10 steps of known
// phase times and one epoch, and prints the run's id. With 2 workers on hosts "a" and "b", local
// replica 0 of each worker carries the cross-worker hop (4 ms a step). The CLI test reads it back.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "store/Recorder.h"
#include "telemetry/Channel.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_workers_run DB WORKERS(1|2)\n");
    return 2;
  }
  const int workers = std::atoi(argv[2]);
  if (workers != 1 && workers != 2) return 2;
  auto ch = std::make_shared<ml::Channel>();
  ml::Recorder rec(argv[1], ch);
  ml::RunStarted s;
  s.runName = workers == 2 ? "two workers" : "one worker";
  s.projectJson = R"({"name":"workers"})";
  s.configJson = R"({"devices":"cpu:)" + std::to_string(4 / workers) + R"(","workers":)" + std::to_string(workers) + "}";
  s.replicas = 4;
  s.workers = workers;
  for (int r = 0; r < 4; ++r) {
    const std::string local = "cpu:" + std::to_string(r % (4 / workers)) + " (simulated)";
    s.devices.push_back(workers == 2 ? std::string(r < 2 ? "a/worker1/" : "b/worker2/") + local : local);
  }
  if (workers == 2) s.hosts = {"a", "b"};
  s.globalBatch = 64;
  s.perReplicaBatch = 16;
  s.baseLr = s.lr = 0.01;
  s.epochs = 1;
  s.stepsPerEpoch = s.totalSteps = 10;
  ch->tryPush(s);
  for (int i = 1; i <= 10; ++i) {
    ml::StepEvent e;
    e.step = i;
    e.epoch = 1;
    e.stepInEpoch = i;
    e.stepsPerEpoch = 10;
    e.loss = 1.0 / i;
    e.samples = 64;
    e.stepTime = 0.02;
    e.wallTime = 0.02 * i;
    for (int r = 0; r < 4; ++r) {
      ml::ReplicaStep rs;
      rs.replica = r;
      rs.samples = 16;
      rs.start = e.wallTime - e.stepTime;
      // 20 ms a step on every replica: 12 ms compute + 2 ms all-reduce + 2 ms optimizer, and 4 ms
      // either on the network (the replica carrying the cross-worker hop) or waiting for it.
      const bool carries = workers == 2 && r % 2 == 0;
      rs.phases = {0.005, 0.007, 0.002, carries ? 0.0 : 0.004, 0.002, 0.0, carries ? 0.004 : 0.0};
      e.replicas.push_back(rs);
    }
    ch->tryPush(e);
  }
  ml::EpochEvent ep;
  ep.epoch = 1;
  ep.seconds = 0.2;
  ep.samplesPerSec = 3200;
  ep.checksums.assign(4, 0xabcull);
  ch->tryPush(ep);
  ch->tryPush(ml::RunFinished{ml::RunStatus::Finished, "", 0.2, 10, 0.5, 0.75});
  rec.stop();
  if (!rec.error().empty() || !rec.runId()) {
    std::fprintf(stderr, "recording failed: %s\n", rec.error().c_str());
    return 1;
  }
  std::printf("%lld\n", static_cast<long long>(*rec.runId()));
  return 0;
}
