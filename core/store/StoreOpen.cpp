// Opening a run store safely: the file is checked read-only (header, application_id,
// user_version, tables) before anything is written, so a file that is not ours is never touched;
// only SQLite's own verdict (WAL included) calls a store damaged, and locks are waited for.
// Then WAL mode, forward migrations, and runs whose writer died are marked interrupted.
#include <fcntl.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "Error.h"
#include "Limits.h"
#include "store/HostInfo.h"
#include "store/RunStore.h"
#include "store/Schema.h"

namespace ml {
namespace fs = std::filesystem;
using store::kApplicationId;
using store::kSchemaVersion;

namespace {

// PRAGMA quick_check reads every page (about 5 ms per MB): small stores are checked whole; on
// larger ones only the small tables are, so that `runs list` stays fast. Damage in the big
// tables shows up as an error naming the file when those pages are read.
constexpr uintmax_t kQuickCheckAllBytes = 8u << 20;

const char* kFixMove =
    "; the file was left unchanged — choose another file with --db PATH or MIRRORLAB_DB, or move "
    "it away and a new store will be created there";

[[noreturn]] void reject(const std::string& path, const std::string& problem, const char* fix = kFixMove) {
  throw UserError("run store " + path + ": " + problem + fix);
}

// Throws when the file system holding the store has (almost) no room left: the store is fine,
// the disk is not.
void diskFullCheck(const std::string& path, const std::string& what) {
  fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return;
  const uint64_t freeBytes = uint64_t(st.f_bavail) * st.f_frsize;
  if (freeBytes >= (1u << 20)) return;
  throw UserError("run store " + path + " cannot be opened: the disk holding it is full (" + humanBytes(double(freeBytes)) +
                  " free; SQLite: " + what + ") — free some space and try again; the store was not changed");
}

uint32_t be32(const unsigned char* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }

// The 100-byte SQLite header, read with plain file I/O: not SQLite, or visibly truncated. The
// truncation test holds only without a write-ahead log: with one, the newest pages (and the
// database's true size) are in the -wal file, where SQLite reads them — a store whose last
// checkpoint hit a full disk is intact, and must never be called damaged.
// Returns true when the header says the file is in WAL mode.
bool checkHeader(const std::string& path, uintmax_t size, bool walHasFrames) {
  std::array<unsigned char, 100> h{};
  std::ifstream in(path, std::ios::binary);
  if (!in) reject(path, std::string("cannot be read (") + std::strerror(errno) + ")");
  in.read(reinterpret_cast<char*>(h.data()), h.size());
  static const char kMagic[] = "SQLite format 3";  // 16 bytes with its NUL
  if (in.gcount() < 16 || std::memcmp(h.data(), kMagic, 16) != 0)
    reject(path, "is not a SQLite database (it does not start with the SQLite header)");
  if (in.gcount() < 100) reject(path, "is damaged (shorter than a SQLite header)");
  uint32_t pageSize = (uint32_t(h[16]) << 8) | h[17];
  if (pageSize == 1) pageSize = 65536;
  if (pageSize < 512 || (pageSize & (pageSize - 1)) != 0) reject(path, "is damaged (invalid page size in the header)");
  uint32_t pages = be32(&h[28]);
  bool pagesValid = be32(&h[24]) == be32(&h[92]);
  if (!walHasFrames && pagesValid && pages > 0 && size < uintmax_t(pages) * pageSize)
    reject(path, "is damaged (truncated: " + std::to_string(size) + " bytes, the header says " +
                     std::to_string(uintmax_t(pages) * pageSize) + ")");
  return h[18] == 2 && h[19] == 2;
}

// SQLite URIs give '%', '?' and '#' a meaning: escape them in file names.
std::string uriEscape(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::string> userTables(sql::Db& db) {
  std::vector<std::string> names;
  auto s = db.prepare("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'");
  while (s.step()) names.push_back(s.getText(0));
  return names;
}

void quickCheck(sql::Db& db, const std::string& path, uintmax_t size, const std::vector<std::string>& tables) {
  std::vector<std::string> pragmas;
  if (size <= kQuickCheckAllBytes) {
    pragmas.push_back("PRAGMA quick_check(1)");
  } else {
    for (const char* t : {"runs", "epochs", "tags", "artifacts"})
      if (std::find(tables.begin(), tables.end(), t) != tables.end())
        pragmas.push_back(std::string("PRAGMA quick_check(") + t + ")");
  }
  for (const auto& p : pragmas) {
    std::string r = db.queryText(p);
    if (r != "ok") reject(path, "is damaged (" + r + ")");
  }
}

// Everything the read-only connection can tell: is this our store, which version, intact?
// Long: each way a file can fail to be our store gets its own message naming the fix, in the
// order SQLite lets us ask (application id, version, tables, integrity).
void checkContents(const std::string& path, uintmax_t size, bool walHeader) {
  // A WAL-mode file with no -wal/-shm beside it is closed (nobody has it open) and the main file
  // is the whole truth: read it immutable, which creates no files beside a file that may not be
  // ours. Otherwise read it as SQLite does, with locks (and the busy timeout) and through the
  // WAL: a store that another process is creating or converting right now is waited for, not
  // half-read and called damaged.
  std::error_code ec;
  const bool walInUse = fs::exists(path + "-wal", ec) || fs::exists(path + "-shm", ec);
  const bool immutable = walHeader && !walInUse;
  std::string uri = "file:" + uriEscape(path) + (immutable ? "?mode=ro&immutable=1" : "?mode=ro");
  try {
    sql::Db db = sql::Db::open(uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    sqlite3_busy_timeout(db.handle(), 10000);  // a writer in this or another process may hold a lock
    auto tables = userTables(db);
    int64_t app = db.queryInt("PRAGMA application_id");
    int64_t version = db.queryInt("PRAGMA user_version");
    if (app != kApplicationId) {
      if (app != 0) {
        std::ostringstream os;
        os << "is a SQLite database of another application (application_id 0x" << std::hex << static_cast<uint32_t>(app)
           << "), not a Mirrorlab run store";
        reject(path, os.str());
      }
      if (!tables.empty())
        reject(path,
               "is a SQLite database with other tables (" + clipText(tables.front(), 40) + ", ...), not a Mirrorlab run store");
      if (version != 0)
        reject(path, "is a SQLite database of another application (user_version " + std::to_string(version) +
                         "), not a Mirrorlab run store");
      return;  // an empty SQLite file: adopt it
    }
    // Ours, but a version no Mirrorlab writes: the migrations would be indexed with it.
    if (version < 0)
      reject(
          path,
          "is damaged or not a Mirrorlab run store (schema version " + std::to_string(version) + ", which no Mirrorlab writes)",
          "; the file was left unchanged — restore it from a backup, or choose another file with "
          "--db PATH or MIRRORLAB_DB");
    if (version > kSchemaVersion)
      reject(path,
             "was written by a newer Mirrorlab (schema version " + std::to_string(version) + ", this build reads up to " +
                 std::to_string(kSchemaVersion) + ")",
             "; the file was left unchanged — upgrade Mirrorlab, or choose another file with "
             "--db PATH or MIRRORLAB_DB");
    auto need = [&](const char* t) {
      if (std::find(tables.begin(), tables.end(), t) == tables.end())
        reject(path, std::string("is damaged (table '") + t + "' is missing)");
    };
    if (version >= 1)
      for (const char* t : store::kTablesV1) need(t);
    if (version >= 2)
      for (const char* t : store::kTablesV2) need(t);
    if (version >= 4)
      for (const char* t : store::kTablesV4) need(t);
    if (version >= 6)
      for (const char* t : store::kTablesV6) need(t);
    for (const auto& t : tables) db.queryInt("SELECT count(*) FROM (SELECT 1 FROM \"" + t + "\" LIMIT 1)");
    if (version >= 1) db.queryInt("SELECT count(*) FROM runs");
    quickCheck(db, path, size, tables);
  } catch (const sql::Error& e) {
    // Only SQLite's own verdict makes a store "damaged"; a lock, an I/O error or a missing
    // permission says nothing about the file's contents, and moving it away would lose runs.
    if (e.code() == SQLITE_NOTADB) reject(path, "is not a SQLite database (or its first page is damaged)");
    if (e.code() == SQLITE_CORRUPT) reject(path, std::string("is damaged (") + e.what() + ")");
    if (e.code() == SQLITE_FULL || e.code() == SQLITE_IOERR || e.code() == SQLITE_CANTOPEN) diskFullCheck(path, e.what());
    if (e.code() == SQLITE_BUSY || e.code() == SQLITE_LOCKED)
      throw UserError("run store " + path + " is locked by another process (" + e.what() +
                      "); nothing was changed — wait for the other Mirrorlab to finish and try again");
    throw UserError("run store " + path + " cannot be read (" + e.what() +
                    "); nothing was changed — check the file's permissions and the disk, then try again");
  }
}

[[noreturn]] void notWritable(const std::string& path, const std::string& why) {
  throw UserError("run store " + path + " cannot be written (" + why +
                  ") — choose a writable file with --db PATH or "
                  "MIRRORLAB_DB");
}

// Creates the folder for a new store and checks that the file and folder can be written
// (WAL needs to create -wal and -shm files beside the store).
void prepareLocation(const std::string& path, bool exists) {
  fs::path p(path);
  fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) notWritable(path, "cannot create the folder " + dir.string() + ": " + ec.message());
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    notWritable(path, "the folder " + dir.string() + " is read-only: " + std::strerror(errno));
  if (exists && ::access(path.c_str(), W_OK) != 0)
    notWritable(path, std::string("the file is read-only: ") + std::strerror(errno));
}

bool processAlive(int64_t pid, int64_t start) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  bool zombie = false;
  int64_t now = processStartTicks(pid, &zombie);
  if (zombie) return false;
  return start == 0 || now == 0 || now == start;  // a different start: the pid was reused
}

}  // namespace

RunStore RunStore::open(const std::string& path) {
  if (path.empty()) throw UserError("run store path is empty; give a file with --db PATH or MIRRORLAB_DB");
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  bool exists = fs::exists(st);
  if (exists && fs::is_directory(st))
    throw UserError("run store " + path + " is a folder, not a file; give a file such as " +
                    (fs::path(path) / "runs.sqlite").string() + " with --db PATH");
  uintmax_t size = exists ? fs::file_size(path, ec) : 0;
  if (exists && size > 0) {
    const uintmax_t walSize = fs::file_size(path + "-wal", ec);
    const bool walHasFrames = !ec && walSize > 32;  // more than the WAL header: pages live there
    const bool walHeader = checkHeader(path, size, walHasFrames);
    checkContents(path, size, walHeader);
  }
  prepareLocation(path, exists);

  RunStore s;
  try {
    s.db_ = sql::Db::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (s.db_.readOnly()) notWritable(path, "the file is read-only");
    s.configure();
    s.migrate();
  } catch (const sql::Error& e) {
    // SQLite says "disk I/O error" when it cannot create the -shm/-wal files on a full disk.
    if (e.code() == SQLITE_FULL || e.code() == SQLITE_IOERR || e.code() == SQLITE_CANTOPEN) diskFullCheck(path, e.what());
    if (e.code() == SQLITE_READONLY || e.code() == SQLITE_CANTOPEN || e.code() == SQLITE_PERM || e.code() == SQLITE_IOERR)
      notWritable(path, e.what());
    if (e.code() == SQLITE_CORRUPT || e.code() == SQLITE_NOTADB)
      reject(path, std::string("is damaged (") + e.what() + ")",
             "; restore it from a backup, or move it away and a new store will be created");
    throw UserError("run store " + path + ": " + e.what());
  }
  // Best effort: on a full disk the store must still open for reading (runs list, show), and
  // the dead runs are marked by the next opening that can write.
  try {
    s.markInterruptedRuns();
    s.markInterruptedSweeps();
    s.removeStaleCheckpointTemps();
  } catch (const sql::Error&) {
  }
  return s;
}

int RunStore::removeStaleCheckpointTemps() {
  // A checkpoint is written to .step-N.mlck.tmp-PID-K and renamed; a kill in between leaves the
  // temporary file. Only runs that are not running can have such leftovers: a running one may be
  // writing its temporary file right now (on this or, with a shared folder, another host).
  const std::string root = checkpointFolder(path(), 0);
  if (root.empty()) return 0;
  const fs::path base = fs::path(root).parent_path();
  std::error_code ec;
  if (!fs::is_directory(base, ec)) return 0;
  std::set<int64_t> running;
  auto q = db_.prepare("SELECT id FROM runs WHERE status='running'");
  while (q.step()) running.insert(q.getInt(0));
  int removed = 0;
  for (const auto& runDir : fs::directory_iterator(base, ec)) {
    const std::string name = runDir.path().filename().string();
    if (name.rfind("run-", 0) != 0 || !runDir.is_directory(ec)) continue;
    int64_t id = 0;
    try {
      id = std::stoll(name.substr(4));
    } catch (const std::exception&) {
      continue;
    }
    if (running.count(id)) continue;
    for (const auto& f : fs::directory_iterator(runDir.path(), ec)) {
      const std::string file = f.path().filename().string();
      if (file.rfind(".step-", 0) == 0 && file.find(".mlck.tmp-") != std::string::npos && fs::remove(f.path(), ec)) ++removed;
    }
  }
  return removed;
}

RunStore RunStore::openForReading(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const bool exists = fs::is_regular_file(path, ec);
  const uintmax_t size = exists ? fs::file_size(path, ec) : 0;
  const bool writable = ::access(dir.c_str(), W_OK | X_OK) == 0 && (!exists || ::access(path.c_str(), W_OK) == 0);
  if (!exists || size == 0 || writable) return open(path);
  const uintmax_t walSize = fs::file_size(path + "-wal", ec);
  const bool walHasFrames = !ec && walSize > 32;
  const bool walHeader = checkHeader(path, size, walHasFrames);
  checkContents(path, size, walHeader);
  // As checkContents reads it: immutable when no -wal or -shm is beside it (SQLite could not
  // create them in a read-only folder), else through the WAL.
  const bool walInUse = fs::exists(path + "-wal", ec) || fs::exists(path + "-shm", ec);
  const std::string uri = "file:" + uriEscape(path) + (walHeader && !walInUse ? "?mode=ro&immutable=1" : "?mode=ro");
  RunStore s;
  try {
    s.db_ = sql::Db::open(uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, path);
    sqlite3_busy_timeout(s.db_.handle(), sql::kBusyTimeoutMs);
    s.db_.exec("PRAGMA foreign_keys=ON;");
    if (s.db_.queryInt("PRAGMA user_version") < kSchemaVersion)
      throw UserError("run store " + path + " was written by an older Mirrorlab (schema version " +
                      std::to_string(s.db_.queryInt("PRAGMA user_version")) +
                      ") and is read-only here: it is upgraded when it is opened with write access once; nothing was "
                      "changed");
    (void)s.db_.queryInt("SELECT count(*) FROM runs");
  } catch (const sql::Error& e) {
    throw UserError("run store " + path + " cannot be read (" + e.what() +
                    "); nothing was changed — check the file's permissions and the disk, then try again");
  }
  return s;
}

void RunStore::configure() {
  // Switching a new store to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once
  // (without its busy handler) when another process holds a shared one, as when two trainings
  // create the same store together: retry for as long as the busy timeout.
  std::string mode;
  for (int waited = 0;; waited += 20) {
    try {
      mode = db_.queryText("PRAGMA journal_mode=WAL");
      break;
    } catch (const sql::Error& e) {
      if ((e.code() != SQLITE_BUSY && e.code() != SQLITE_LOCKED) || waited >= sql::kBusyTimeoutMs) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (mode != "wal") notWritable(path(), "cannot switch to WAL mode (journal_mode " + mode + ")");
  db_.exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
}

void RunStore::migrate() {
  if (db_.queryInt("PRAGMA user_version") == kSchemaVersion && db_.queryInt("PRAGMA application_id") == kApplicationId)
    return;                  // the usual case: no write lock needed
  sql::Transaction tx(db_);  // IMMEDIATE: two processes opening a new store do not race
  int64_t app = db_.queryInt("PRAGMA application_id");
  int64_t version = db_.queryInt("PRAGMA user_version");
  if ((app != 0 && app != kApplicationId) || version > kSchemaVersion || version < 0)
    reject(path(), "changed while it was being opened (application_id or schema version)");
  for (int64_t next = version + 1; next <= kSchemaVersion; ++next) db_.exec(store::kMigrations[next - 1]);
  if (version != kSchemaVersion) db_.exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
  if (app != kApplicationId) db_.exec(("PRAGMA application_id=" + std::to_string(kApplicationId)).c_str());
  tx.commit();
}

int RunStore::markInterruptedRuns() {
  std::string host = hostName();
  std::vector<int64_t> dead;
  auto q = db_.prepare("SELECT id, pid, pid_start FROM runs WHERE status='running' AND host=?");
  q.bind(1, host);
  while (q.step())
    if (!processAlive(q.getInt(1), q.getInt(2))) dead.push_back(q.getInt(0));
  if (dead.empty()) return 0;
  sql::Transaction tx(db_);
  // The run ended, at the latest, with its last committed step.
  auto u = db_.prepare(
      "UPDATE runs SET status='interrupted', "
      "error=CASE WHEN error='' THEN 'the process writing this run ended without finishing it "
      "(killed or crashed)' ELSE error END, "
      "finished=created + coalesce((SELECT wall_time FROM steps WHERE run_id=runs.id "
      "ORDER BY step DESC LIMIT 1), 0), "
      "steps=(SELECT max(step) FROM steps WHERE run_id=runs.id) "
      "WHERE id=? AND status='running'");
  for (int64_t id : dead) u.bind(1, id).run();
  tx.commit();
  return static_cast<int>(dead.size());
}

bool RunStore::writerAlive(const std::string& host, int64_t pid, int64_t pidStart) {
  return host != hostName() || processAlive(pid, pidStart);
}

int RunStore::markInterruptedSweeps() {
  std::vector<int64_t> dead;
  const std::string host = hostName();
  auto q = db_.prepare("SELECT id, pid, pid_start FROM sweeps WHERE status='running' AND host=?");
  q.bind(1, host);
  while (q.step())
    if (!processAlive(q.getInt(1), q.getInt(2))) dead.push_back(q.getInt(0));
  if (dead.empty()) return 0;
  sql::Transaction tx(db_);
  auto u = db_.prepare("UPDATE sweeps SET status='interrupted' WHERE id=? AND status='running'");
  auto p = db_.prepare(
      "UPDATE sweep_points SET status='interrupted', message='the sweep''s process ended during this point (killed or "
      "crashed)' WHERE sweep_id=? AND status='running'");
  for (int64_t id : dead) {
    u.bind(1, id).run();
    p.bind(1, id).run();
  }
  tx.commit();
  return static_cast<int>(dead.size());
}

std::string defaultStorePath() {
  if (const char* db = std::getenv("MIRRORLAB_DB"); db && *db) return db;
  fs::path base;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg)
    base = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home)
    base = fs::path(home) / ".local" / "share";
  else
    base = ".";
  return (base / "mirrorlab" / "runs.sqlite").string();
}

}  // namespace ml
