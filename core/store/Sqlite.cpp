// RAII wrappers over SQLite's C API; see Sqlite.h.
#include "store/Sqlite.h"

namespace ml::sql {

std::string message(sqlite3* db, const std::string& path, int rc, std::string_view what) {
  std::string m = path + ": ";
  m += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (!what.empty()) {
    m += " (";
    m += what;
    m += ")";
  }
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: m += " — the database file is damaged; restore it from a backup or move it away"; break;
    case SQLITE_FULL: m += " — the disk is full; free some space"; break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: m += " — another process kept the database locked for longer than 10 s; try again"; break;
    case SQLITE_READONLY: m += " — the database file or its folder is read-only"; break;
    default: break;
  }
  return m;
}

Stmt::Stmt(sqlite3* db, const std::string* path, std::string_view sql) : db_(db), path_(path) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  stmt_.reset(s);
  if (rc != SQLITE_OK) throw Error(rc & 0xff, message(db, *path, rc, sql));
}

void Stmt::check(int rc, const char* what) const {
  if (rc != SQLITE_OK) throw Error(rc & 0xff, message(db_, *path_, rc, what));
}

Stmt& Stmt::bind(int i, int64_t v) {
  check(sqlite3_bind_int64(stmt_.get(), i, v), "bind");
  return *this;
}
Stmt& Stmt::bind(int i, double v) {
  check(sqlite3_bind_double(stmt_.get(), i, v), "bind");
  return *this;
}
Stmt& Stmt::bind(int i, std::string_view v) {
  check(sqlite3_bind_text64(stmt_.get(), i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8), "bind");
  return *this;
}
Stmt& Stmt::bind(int i, std::nullptr_t) {
  check(sqlite3_bind_null(stmt_.get(), i), "bind");
  return *this;
}

bool Stmt::step() {
  int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Reset so the statement can be reused after the caller handles the error.
  std::string m = message(db_, *path_, rc, sqlite3_sql(stmt_.get()));
  sqlite3_reset(stmt_.get());
  throw Error(rc & 0xff, m);
}

void Stmt::run() {
  while (step()) {
  }
  reset();
}

void Stmt::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

std::string Stmt::getText(int c) const {
  const unsigned char* t = sqlite3_column_text(stmt_.get(), c);
  if (!t) return {};
  return std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(sqlite3_column_bytes(stmt_.get(), c)));
}

Db Db::open(const std::string& path, int flags, const std::string& name) {
  Db d;
  d.path_ = std::make_unique<std::string>(name.empty() ? path : name);
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  d.db_.reset(raw);  // sqlite3_open_v2 may hand back a handle even on failure
  if (rc != SQLITE_OK) throw Error(rc & 0xff, message(raw, *d.path_, rc, "open"));
  sqlite3_extended_result_codes(raw, 0);
  // Every connection waits on a lock (another process creating, migrating or recording) instead
  // of failing at once with "database is locked".
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  return d;
}

void Db::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    // The same message (and fix) as a failed statement: "disk is full; free some space", ...
    std::string m = message(db_.get(), *path_, rc, "");
    if (err && m.find(err) == std::string::npos) m = *path_ + ": " + err;
    sqlite3_free(err);
    throw Error(rc & 0xff, m);
  }
}

int64_t Db::queryInt(std::string_view sql) {
  Stmt s = prepare(sql);
  return s.step() ? s.getInt(0) : 0;
}

std::string Db::queryText(std::string_view sql) {
  Stmt s = prepare(sql);
  return s.step() ? s.getText(0) : std::string();
}

Transaction::Transaction(Db& db) : db_(db) {
  if (!db_.inTransaction()) {
    db_.exec("BEGIN IMMEDIATE");
    owner_ = true;
  }
}

Transaction::~Transaction() {
  if (owner_ && !done_ && db_.inTransaction()) sqlite3_exec(db_.handle(), "ROLLBACK", 0, 0, 0);
}

void Transaction::commit() {
  if (owner_ && !done_) db_.exec("COMMIT");
  done_ = true;
}

}  // namespace ml::sql
