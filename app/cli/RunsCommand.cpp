// `runs list|show|compare|export|rename|tag|note|delete`: the run store from a terminal.
// Tables are aligned for a terminal; `list --json` is for scripts.
#include "RunsCommand.h"
#include "Format.h"

#include "Commands.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "Error.h"
#include "JsonFile.h"
#include "export/TensorBoardExport.h"
#include "store/RunCompare.h"
#include "store/RunFigures.h"
#include "store/RunStore.h"

namespace mlcli {
namespace {

struct RunsArgs {
  std::string db;
  std::string status, tag, name;  // list filters
  bool json = false;
  int64_t id = 0;
  std::vector<int64_t> ids;
  double target = 0.85;
  std::string csvDir, tensorboardDir, text;
  bool remove = false;
};

ml::RunStore openStore(const RunsArgs& a) { return ml::RunStore::open(a.db.empty() ? ml::defaultStorePath() : a.db); }
// list, show, compare and export only read: a store on a read-only file or medium serves them.
ml::RunStore openToRead(const RunsArgs& a) { return ml::RunStore::openForReading(a.db.empty() ? ml::defaultStorePath() : a.db); }

// ---- formatting -------------------------------------------------------------------------------

std::string fmt(const char* f, double v) { return ml::formatNumber(f, v); }
std::string fmt(const char* f, const std::optional<double>& v) { return v ? fmt(f, *v) : "-"; }
std::string pct(double share) { return fmt("%.1f%%", 100 * share); }

std::string date(double unixSeconds) {
  std::time_t t = static_cast<std::time_t>(unixSeconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string duration(double s) {
  if (s < 1) return fmt("%.3f s", s);
  if (s < 60) return fmt("%.1f s", s);
  long total = static_cast<long>(s + 0.5);
  char buf[32];
  if (total < 3600)
    std::snprintf(buf, sizeof buf, "%ldm %02lds", total / 60, total % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh %02ldm", total / 3600, (total % 3600) / 60);
  return buf;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Display width of UTF-8 text: code points, not bytes.
size_t width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Columns padded to their widest cell; numbers right-aligned, text left-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(const char* indent = "") const {
    std::vector<size_t> w;
    std::vector<bool> numeric;  // a column of numbers (and "-") is right-aligned, header too
    for (size_t i = 0; i < rows_.size(); ++i)
      for (size_t c = 0; c < rows_[i].size(); ++c) {
        if (w.size() <= c) {
          w.push_back(0);
          numeric.push_back(rows_.size() > 1);
        }
        w[c] = std::max(w[c], width(rows_[i][c]));
        if (i > 0) numeric[c] = numeric[c] && looksNumeric(rows_[i][c]);
      }
    for (const auto& row : rows_) {
      std::string line = indent;
      for (size_t c = 0; c < row.size(); ++c) {
        std::string pad(w[c] - width(row[c]), ' ');
        line += numeric[c] ? pad + row[c] : row[c] + pad;
        line += "  ";
      }
      line.erase(line.find_last_not_of(' ') + 1);
      std::printf("%s\n", line.c_str());
    }
  }

 private:
  static bool looksNumeric(const std::string& s) {
    if (s == "-") return true;
    size_t i = (s.size() > 1 && s[0] == '-') ? 1 : 0;
    return i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.') && s.find(' ') == std::string::npos;
  }
  std::vector<std::vector<std::string>> rows_;
};

// ---- list -------------------------------------------------------------------------------------

nlohmann::json toJson(const ml::RunSummary& s) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"id", s.id},
          {"name", s.name},
          {"created", s.created},
          {"finished", opt(s.finished)},
          {"status", s.status},
          {"devices", s.devices},
          {"replicas", s.replicas},
          {"global_batch", s.globalBatch},
          {"lr", opt(s.lr)},
          {"final_val_metric", opt(s.finalValMetric)},
          {"final_val_loss", opt(s.finalValLoss)},
          {"seconds_per_epoch", opt(s.secondsPerEpoch)},
          {"epochs", s.epochsDone},
          {"tags", s.tags}};
}

int list(const RunsArgs& a) {
  ml::RunStore store = openToRead(a);
  auto runs = store.listRuns({a.status, a.tag, a.name});
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : runs) out.push_back(toJson(s));
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (runs.empty()) {
    std::printf("no runs in %s%s\n", store.path().c_str(),
                a.status.empty() && a.tag.empty() && a.name.empty() ? "" : " match the filters");
    return 0;
  }
  Table t({"ID", "NAME", "CREATED", "DEVICES", "BATCH", "LR", "VAL ACC", "S/EPOCH", "STATUS", "TAGS"});
  for (const auto& s : runs)
    t.add({std::to_string(s.id), s.name, date(s.created), s.devices, std::to_string(s.globalBatch), fmt("%.4g", s.lr),
           fmt("%.4f", s.finalValMetric), fmt("%.2f", s.secondsPerEpoch), s.status, join(s.tags, ",")});
  t.print();
  return 0;
}

// ---- show -------------------------------------------------------------------------------------

void printKeyValues(const std::map<std::string, std::string>& kv) {
  size_t keyWidth = 0;
  for (const auto& [k, v] : kv) keyWidth = std::max(keyWidth, width(k));
  for (const auto& [k, v] : kv) std::printf("  %s%s  %s\n", k.c_str(), std::string(keyWidth - width(k), ' ').c_str(), v.c_str());
}

void printEpochs(const std::vector<ml::EpochEvent>& epochs) {
  Table t({"EPOCH", "TRAIN LOSS", "TRAIN ACC", "VAL LOSS", "VAL ACC", "SECONDS", "SAMPLES/S", "ALLREDUCE", "WAIT", "IN SYNC"});
  for (const auto& e : epochs)
    t.add({std::to_string(e.epoch), fmt("%.4f", e.trainLoss), fmt("%.4f", e.trainMetric), fmt("%.4f", e.valLoss),
           fmt("%.4f", e.valMetric), fmt("%.2f", e.seconds), fmt("%.0f", e.samplesPerSec), pct(e.allreduceShare),
           pct(e.waitShare), e.inSync ? "yes" : "NO"});
  t.print("  ");
}

// Several workers: the cross-worker hop of the all-reduce gets its own columns (none otherwise).
void printReplicas(const ml::RunDetail& d) {
  const bool network =
      std::any_of(d.replicas.begin(), d.replicas.end(), [](const ml::ReplicaShare& r) { return r.total.network > 0; });
  std::vector<std::string> header = {"REPLICA", "DEVICE", "STEPS", "SAMPLES", "COMPUTE", "ALLREDUCE"};
  if (network) header.push_back("NETWORK");
  header.insert(header.end(), {"WAIT", "COMPUTE %", "ALLREDUCE %"});
  if (network) header.push_back("NETWORK %");
  header.push_back("WAIT %");
  Table t(header);
  for (const auto& r : d.replicas) {
    std::string device = r.replica < int(d.deviceNames.size()) ? d.deviceNames[r.replica] : "";
    std::vector<std::string> row = {std::to_string(r.replica),   device,
                                    std::to_string(r.steps),     std::to_string(r.samples),
                                    duration(r.total.compute()), duration(r.total.allreduce)};
    if (network) row.push_back(duration(r.total.network));
    row.insert(row.end(), {duration(r.total.wait), pct(r.computeShare()), pct(r.allreduceShare())});
    if (network) row.push_back(pct(r.networkShare()));
    row.push_back(pct(r.waitShare()));
    t.add(row);
  }
  t.print("  ");
}

// "2 on a, b (2 replicas each)": the workers of a run, their hosts by rank.
std::string workersText(const ml::RunDetail& d) {
  std::string out = std::to_string(d.workers);
  if (!d.hosts.empty()) out += " on " + join(d.hosts, ", ");
  const int replicas = d.summary.replicas;
  if (replicas % d.workers == 0)
    out += " (" + std::to_string(replicas / d.workers) + (replicas / d.workers == 1 ? " replica each)" : " replicas each)");
  else
    out += " (" + std::to_string(replicas) + " replicas in all)";
  return out;
}

int show(const RunsArgs& a) {
  ml::RunStore store = openToRead(a);
  ml::RunDetail d = store.loadRun(a.id);
  const ml::RunSummary& s = d.summary;
  std::printf("Run %lld \"%s\" — %s\n", static_cast<long long>(s.id), s.name.c_str(), s.status.c_str());
  std::printf("  created   %s", date(s.created).c_str());
  if (s.finished) std::printf(", ended %s (%s)", date(*s.finished).c_str(), duration(*s.finished - s.created).c_str());
  std::printf("\n  host      %s (pid %lld)\n", d.host.c_str(), static_cast<long long>(d.pid.value_or(0)));
  std::printf("  devices   %s\n", join(d.deviceNames, ", ").c_str());
  if (d.workers > 1) std::printf("  workers   %s\n", workersText(d).c_str());
  if (!d.description.empty()) std::printf("  plan      %s\n", d.description.c_str());
  if (!d.error.empty()) std::printf("  message   %s\n", d.error.c_str());
  if (!s.tags.empty()) std::printf("  tags      %s\n", join(s.tags, ", ").c_str());
  if (!d.note.empty()) std::printf("  note      %s\n", d.note.c_str());
  if (d.droppedEvents > 0)
    std::printf("  warning   %llu telemetry events were dropped (recorder too slow)\n",
                static_cast<unsigned long long>(d.droppedEvents));

  std::printf("\nConfiguration\n");
  auto cfg = ml::parseJsonOrDiscarded(d.configJson);
  printKeyValues(ml::flattenJson(cfg.is_discarded() ? nlohmann::json::object() : cfg));
  std::printf("\nHost\n");
  auto host = ml::parseJsonOrDiscarded(d.hostJson);
  printKeyValues(ml::flattenJson(host.is_discarded() ? nlohmann::json::object() : host));

  std::printf("\nEpochs\n");
  if (d.epochs.empty())
    std::printf("  (none recorded)\n");
  else
    printEpochs(d.epochs);
  std::printf("\nSync share per device\n");
  if (d.replicas.empty())
    std::printf("  (no steps recorded)\n");
  else
    printReplicas(d);
  if (!d.events.empty()) {
    std::printf("\nEvents (pauses are left out of every time above)\n");
    Table t({"STEP", "EVENT", "SECONDS", "DETAIL"});
    char secs[32];
    for (const auto& e : d.events) {
      std::snprintf(secs, sizeof secs, "%.3f", e.seconds);
      t.add({std::to_string(e.step), e.kind == "pause" ? "paused" : e.kind, secs,
             e.kind == "pause" ? "after this step" : e.message});
    }
    t.print("  ");
  }
  if (!d.artifacts.empty()) {
    std::printf("\nArtifacts\n");
    Table t({"KIND", "PATH", "CHECKSUM", "BYTES"});
    for (const auto& x : d.artifacts) t.add({x.kind, x.path, x.checksum, x.bytes ? std::to_string(*x.bytes) : "-"});
    t.print("  ");
  }
  return 0;
}

// ---- compare ----------------------------------------------------------------------------------

int compare(const RunsArgs& a) {
  if (a.ids.size() < 2) throw ml::UserError("compare needs at least two run ids, e.g. `runs compare 3 5`");
  ml::RunStore store = openToRead(a);
  std::vector<ml::RunDetail> runs;
  for (int64_t id : a.ids) runs.push_back(store.loadRun(id));

  std::vector<std::string> header = {""};
  std::vector<std::string> configs;
  for (const auto& r : runs) {
    header.push_back("run " + std::to_string(r.summary.id));
    configs.push_back(r.configJson);
  }
  std::printf("Configuration (only what differs)\n");
  auto diff = ml::configDiff(configs);
  if (diff.empty()) {
    std::printf("  (identical)\n");
  } else {
    std::vector<std::string> h = header;
    h[0] = "KEY";
    Table t(h);
    for (const auto& row : diff) {
      std::vector<std::string> cells = {row.key};
      for (const auto& v : row.values) cells.push_back(v ? *v : "(absent)");
      t.add(cells);
    }
    t.print("  ");
  }

  std::printf("\nResults (speed-up and efficiency relative to run %lld)\n", static_cast<long long>(runs[0].summary.id));
  std::vector<std::string> h = header;
  h[0] = "";
  Table t(h);
  // One row per quantity, one column per run (k indexes runs).
  auto row = [&](const std::string& label, auto cell) {
    std::vector<std::string> cells = {label};
    for (size_t k = 0; k < runs.size(); ++k) cells.push_back(cell(k));
    t.add(cells);
  };
  std::vector<ml::RunFigures> fig;
  std::vector<std::optional<ml::TargetReached>> reached;
  for (const auto& r : runs) {
    fig.push_back(ml::figuresOf(r, store.loadCurves(r.summary.id)));
    reached.push_back(ml::reachTarget(store, r, a.target));
  }
  auto sum = [&](size_t k) -> const ml::RunSummary& { return runs[k].summary; };
  row("name", [&](size_t k) { return sum(k).name; });
  row("status", [&](size_t k) { return sum(k).status; });
  row("replicas", [&](size_t k) { return std::to_string(sum(k).replicas); });
  if (std::any_of(runs.begin(), runs.end(), [](const ml::RunDetail& r) { return r.workers > 1; }))
    row("workers", [&](size_t k) { return std::to_string(runs[k].workers); });
  row("global batch", [&](size_t k) { return std::to_string(sum(k).globalBatch); });
  row("epochs", [&](size_t k) { return std::to_string(sum(k).epochsDone); });
  row("final val loss", [&](size_t k) { return fmt("%.4f", sum(k).finalValLoss); });
  row("final val acc", [&](size_t k) { return fmt("%.4f", sum(k).finalValMetric); });
  row("seconds / epoch", [&](size_t k) { return sum(k).secondsPerEpoch ? fmt("%.3g", *sum(k).secondsPerEpoch) : "-"; });
  row("ms / step", [&](size_t k) { return fig[k].steps > 0 ? fmt("%.3g", 1e3 * fig[k].secondsPerStep()) : "-"; });
  row("samples / s", [&](size_t k) { return fig[k].samplesPerSec() > 0 ? fmt("%.0f", fig[k].samplesPerSec()) : "-"; });
  const std::string target = fmt("%g", a.target);
  row("time to " + target, [&](size_t k) {
    const auto& x = reached[k];
    return x ? duration(x->seconds) + " (epoch " + std::to_string(x->epoch) + ")" : std::string("not reached");
  });
  row("samples to " + target, [&](size_t k) { return reached[k] ? std::to_string(reached[k]->samples) : "-"; });
  auto ratio = [](double v) { return v > 0 ? fmt("%.2fx", v) : std::string("-"); };
  row("speed-up (samples/s)", [&](size_t k) { return ratio(ml::scalingVs(fig[0], fig[k]).speedup); });
  row("scaling efficiency", [&](size_t k) {
    double e = ml::scalingVs(fig[0], fig[k]).efficiency;
    return e > 0 ? pct(e) : "-";
  });
  t.print("  ");
  for (size_t k = 1; k < runs.size(); ++k)
    if (const auto sc = ml::scalingVs(fig[0], fig[k]); !sc.note.empty())
      std::printf("  run %lld: %s\n", static_cast<long long>(sum(k).id), sc.note.c_str());
  return 0;
}

// ---- edits ------------------------------------------------------------------------------------

// --csv: one run's four tables; --tensorboard: event files, a sub-folder per run.
int exportRuns(const RunsArgs& a) {
  if (a.csvDir.empty() == a.tensorboardDir.empty())
    throw ml::UserError("runs export: pass --csv DIR (one run's tables) or --tensorboard DIR (TensorBoard logs), one of them");
  ml::RunStore store = openToRead(a);
  if (!a.csvDir.empty()) {
    if (a.ids.size() != 1)
      throw ml::UserError("runs export --csv writes one run's tables: name one run (or use --tensorboard for several)");
    store.exportCsv(a.ids.front(), a.csvDir);
    std::printf("wrote steps.csv, epochs.csv, replica_steps.csv, device_samples.csv to %s\n", a.csvDir.c_str());
    return 0;
  }
  for (const auto& r : ml::exportTensorBoard(store, a.ids, a.tensorboardDir))
    std::printf("run %lld: %lld scalars and its configuration as hparams in %s\n", static_cast<long long>(r.run),
                static_cast<long long>(r.scalars), r.folder.c_str());
  std::printf("view them with: tensorboard --logdir %s\n", a.tensorboardDir.c_str());
  return 0;
}

int rename(const RunsArgs& a) {
  openStore(a).renameRun(a.id, a.text);
  std::printf("run %lld is now \"%s\"\n", static_cast<long long>(a.id), a.text.c_str());
  return 0;
}

int tag(const RunsArgs& a) {
  ml::RunStore store = openStore(a);
  if (a.remove)
    store.untagRun(a.id, a.text);
  else
    store.tagRun(a.id, a.text);
  auto runs = store.listRuns();
  for (const auto& s : runs)
    if (s.id == a.id)
      std::printf("run %lld tags: %s\n", static_cast<long long>(a.id), s.tags.empty() ? "(none)" : join(s.tags, ", ").c_str());
  return 0;
}

int note(const RunsArgs& a) {
  openStore(a).setNote(a.id, a.text);
  std::printf("note saved on run %lld\n", static_cast<long long>(a.id));
  return 0;
}

int remove(const RunsArgs& a) {
  openStore(a).deleteRun(a.id);
  std::printf("deleted run %lld and all its rows\n", static_cast<long long>(a.id));
  return 0;
}

}  // namespace

void addRunsCommand(CLI::App& app, int& exitCode) {
  auto a = std::make_shared<RunsArgs>();
  CLI::App* runs = app.add_subcommand("runs", "List, show, compare and export recorded runs");
  runs->require_subcommand(1);
  auto sub = [&](const char* name, const char* help, int (*fn)(const RunsArgs&)) {
    CLI::App* c = runs->add_subcommand(name, help);
    c->add_option("--db", a->db, "Run store (default: $MIRRORLAB_DB, else $XDG_DATA_HOME/mirrorlab/runs.sqlite)");
    c->callback([a, fn, &exitCode] { exitCode = guarded([&] { return fn(*a); }); });
    return c;
  };
  auto idArg = [&](CLI::App* c) { c->add_option("id", a->id, "Run id (see `runs list`)")->required(); };

  CLI::App* l = sub("list", "Table of runs (id, name, date, devices, batch, lr, val acc, s/epoch, status)", list);
  l->add_option("--status", a->status,
                "Only runs with this status (running, finished, cancelled, diverged, failed, interrupted)");
  l->add_option("--tag", a->tag, "Only runs with this tag");
  l->add_option("--name", a->name, "Only runs whose name contains this (case-insensitive)");
  l->add_flag("--json", a->json, "Print JSON for scripts");

  idArg(sub("show", "Configuration, epochs and sync share per device of one run", show));

  CLI::App* c = sub("compare", "Configuration diff, final metrics, time to target, speed-up and scaling efficiency", compare);
  c->add_option("ids", a->ids, "Run ids; the first is the baseline")->required();
  c->add_option("--target", a->target, "Validation accuracy to reach (default 0.85)");

  CLI::App* e = sub("export", "Write runs' steps, epochs and per-replica timings as CSV or as TensorBoard logs", exportRuns);
  e->add_option("ids", a->ids, "Run ids (one with --csv)")->required();
  e->add_option("--csv", a->csvDir, "Folder for one run's CSV files (steps, epochs, replica steps, device samples)");
  e->add_option("--tensorboard", a->tensorboardDir,
                "Folder for TensorBoard event files, a sub-folder per run (tensorboard --logdir DIR)");

  CLI::App* r = sub("rename", "Rename a run", rename);
  idArg(r);
  r->add_option("name", a->text, "New name")->required();

  CLI::App* t = sub("tag", "Tag a run (or --remove a tag)", tag);
  idArg(t);
  t->add_option("tag", a->text, "Tag")->required();
  t->add_flag("--remove", a->remove, "Remove the tag instead");

  CLI::App* n = sub("note", "Set a run's note (\"\" clears it)", note);
  idArg(n);
  n->add_option("text", a->text, "Note")->required();

  idArg(sub("delete", "Delete a run and all its rows", remove));
}

}  // namespace mlcli
