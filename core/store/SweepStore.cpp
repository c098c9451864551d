// The sweeps and sweep_points tables (schema v3): small, checked reads and writes.
#include "store/SweepStore.h"

#include <chrono>

#include <unistd.h>

#include "Error.h"
#include "store/HostInfo.h"

namespace ml {

int SweepRecord::finishedPoints() const {
  int n = 0;
  for (const auto& p : points) n += p.status == "finished";
  return n;
}

std::string sweepTag(int64_t sweepId) { return "sweep:" + std::to_string(sweepId); }

int64_t createSweep(RunStore& store, const SweepRecord& sw) {
  auto& db = store.db();
  sql::Transaction tx(db);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto s = db.prepare(
      "INSERT INTO sweeps(name, created, status, target, grid_json, options_json, project_json) VALUES(?,?,?,?,?,?,?)");
  s.bindAll(sw.name, sw.created > 0 ? sw.created : now, sw.status.empty() ? std::string("running") : sw.status, sw.target,
            sw.gridJson, sw.optionsJson, sw.projectJson)
      .run();
  const int64_t id = db.lastInsertId();
  auto p = db.prepare(
      "INSERT INTO sweep_points(sweep_id, point, batch_size, lr, devices, lr_scaling, status, run_id, message) "
      "VALUES(?,?,?,?,?,?,?,?,?)");
  for (const auto& pt : sw.points)
    p.bindAll(id, pt.point, pt.batchSize, pt.lr, pt.devices, pt.lrScaling, pt.status, pt.runId, pt.message).run();
  tx.commit();
  return id;
}

namespace {

void loadPoints(RunStore& store, SweepRecord& sw) {
  auto q = store.db().prepare(
      "SELECT point, batch_size, lr, devices, lr_scaling, status, run_id, message FROM sweep_points "
      "WHERE sweep_id=? ORDER BY point");
  q.bind(1, sw.id);
  while (q.step()) {
    SweepPointRow r;
    r.point = static_cast<int>(q.getInt(0));
    r.batchSize = q.getInt(1);
    r.lr = q.getDouble(2);
    r.devices = q.getText(3);
    r.lrScaling = q.getText(4);
    r.status = q.getText(5);
    r.runId = q.getOptInt(6);
    r.message = q.getText(7);
    sw.points.push_back(std::move(r));
  }
}

std::vector<SweepRecord> querySweeps(RunStore& store, std::optional<int64_t> id) {
  auto q = store.db().prepare(
      std::string("SELECT id, name, created, status, target, grid_json, options_json, project_json, host, pid, pid_start "
                  "FROM sweeps") +
      (id ? " WHERE id=?" : "") + " ORDER BY id DESC");
  if (id) q.bind(1, *id);
  std::vector<SweepRecord> out;
  while (q.step()) {
    SweepRecord s;
    s.id = q.getInt(0);
    s.name = q.getText(1);
    s.created = q.getDouble(2);
    s.status = q.getText(3);
    s.target = q.getOptDouble(4);
    s.gridJson = q.getText(5);
    s.optionsJson = q.getText(6);
    s.projectJson = q.getText(7);
    s.host = q.getText(8);
    s.pid = q.getOptInt(9).value_or(0);
    s.pidStart = q.getOptInt(10).value_or(0);
    // A store opened read-only was not marked (RunStore::markInterruptedSweeps): say it here.
    if (s.status == "running" && !RunStore::writerAlive(s.host, s.pid, s.pidStart)) s.status = "interrupted";
    out.push_back(std::move(s));
  }
  for (auto& s : out) loadPoints(store, s);
  return out;
}

void requireChange(RunStore& store, int64_t sweepId) {
  if (store.db().changes() == 0)
    throw UserError("there is no sweep " + std::to_string(sweepId) + " (or no such point) in the run store " + store.path() +
                    ": `mirrorlab-cli sweep --list` lists the sweeps");
}

}  // namespace

SweepRecord loadSweep(RunStore& store, int64_t sweepId) {
  auto all = querySweeps(store, sweepId);
  if (all.empty())
    throw UserError("there is no sweep " + std::to_string(sweepId) + " in the run store " + store.path() +
                    ": `mirrorlab-cli sweep --list` lists the sweeps");
  return std::move(all.front());
}

std::vector<SweepRecord> listSweeps(RunStore& store) { return querySweeps(store, std::nullopt); }

void setSweepStatus(RunStore& store, int64_t sweepId, const std::string& status) {
  if (status == "running") {
    const int64_t pid = ::getpid();
    auto u = store.db().prepare("UPDATE sweeps SET status=?, pid=?, pid_start=?, host=? WHERE id=?");
    u.bindAll(status, pid, processStartTicks(pid), hostName(), sweepId).run();
  } else {
    auto u = store.db().prepare("UPDATE sweeps SET status=? WHERE id=?");
    u.bindAll(status, sweepId).run();
  }
  requireChange(store, sweepId);
}

void setPointState(RunStore& store, int64_t sweepId, int point, const std::string& status, std::optional<int64_t> runId,
                   const std::string& message) {
  auto& db = store.db();
  sql::Transaction tx(db);
  auto u = db.prepare("UPDATE sweep_points SET status=?, run_id=coalesce(?, run_id), message=? WHERE sweep_id=? AND point=?");
  u.bindAll(status, runId, message, sweepId, point).run();
  requireChange(store, sweepId);
  if (runId) store.tagRun(*runId, sweepTag(sweepId));
  tx.commit();
}

void deleteSweep(RunStore& store, int64_t sweepId) {
  auto d = store.db().prepare("DELETE FROM sweeps WHERE id=?");
  d.bind(1, sweepId).run();
  requireChange(store, sweepId);
}

}  // namespace ml
