// A thin RAII layer over SQLite's C API: a connection (Db), prepared statements (Stmt) and
// transactions. Every failure throws sql::Error naming the database file and the SQLite code.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <sqlite3.h>

namespace ml::sql {

// How long any connection waits on another's lock before SQLITE_BUSY.
inline constexpr int kBusyTimeoutMs = 10000;

struct DbCloser {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
};

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }  // primary SQLite result code (SQLITE_CORRUPT, ...)
 private:
  int code_;
};

class Stmt {
 public:
  Stmt() = default;
  Stmt(sqlite3* db, const std::string* path, std::string_view sql);

  // Binds are 1-based, as in SQLite. Optional values bind NULL when empty.
  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::string_view v);
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, std::nullptr_t);
  template <class T>
  Stmt& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind(i, nullptr);
  }
  template <class... A>
  Stmt& bindAll(const A&... a) {
    int i = 0;
    (bind(++i, a), ...);
    return *this;
  }

  bool step();   // true while a row is available; throws on error
  void run();    // steps to completion and resets, for INSERT/UPDATE/DELETE
  void reset();  // ready to bind and step again

  // Columns are 0-based, as in SQLite.
  bool isNull(int c) const { return sqlite3_column_type(stmt_.get(), c) == SQLITE_NULL; }
  int64_t getInt(int c) const { return sqlite3_column_int64(stmt_.get(), c); }
  double getDouble(int c) const { return sqlite3_column_double(stmt_.get(), c); }
  std::string getText(int c) const;
  std::optional<double> getOptDouble(int c) const { return isNull(c) ? std::nullopt : std::optional<double>(getDouble(c)); }
  std::optional<int64_t> getOptInt(int c) const { return isNull(c) ? std::nullopt : std::optional<int64_t>(getInt(c)); }

  explicit operator bool() const { return static_cast<bool>(stmt_); }

 private:
  void check(int rc, const char* what) const;
  std::unique_ptr<sqlite3_stmt, StmtFinalizer> stmt_;
  sqlite3* db_ = nullptr;
  const std::string* path_ = nullptr;  // owned by the Db, which outlives its statements
};

class Db {
 public:
  Db() = default;
  // flags: SQLITE_OPEN_READONLY or SQLITE_OPEN_READWRITE [| SQLITE_OPEN_CREATE]. name: the path
  // that path() and messages give when path is a URI ("file:...?mode=ro"); default path itself.
  static Db open(const std::string& path, int flags, const std::string& name = "");

  void exec(const char* sql);  // one or more statements without results
  Stmt prepare(std::string_view sql) { return Stmt(db_.get(), path_.get(), sql); }
  int64_t queryInt(std::string_view sql);  // first column of the first row (0 when none)
  std::string queryText(std::string_view sql);

  int64_t lastInsertId() const { return sqlite3_last_insert_rowid(db_.get()); }
  int64_t changes() const { return sqlite3_changes64(db_.get()); }
  bool inTransaction() const { return sqlite3_get_autocommit(db_.get()) == 0; }
  bool readOnly() const { return sqlite3_db_readonly(db_.get(), "main") == 1; }
  sqlite3* handle() const { return db_.get(); }
  const std::string& path() const { return *path_; }
  explicit operator bool() const { return static_cast<bool>(db_); }

 private:
  std::unique_ptr<sqlite3, DbCloser> db_;
  std::unique_ptr<std::string> path_;  // stable address for statements' error messages
};

// BEGIN IMMEDIATE ... COMMIT. Inside an already open transaction it joins it and does nothing,
// so functions can be transactional alone and batched together. Rolls back unless committed.
class Transaction {
 public:
  explicit Transaction(Db& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Db& db_;
  bool owner_ = false;
  bool done_ = false;
};

// An error message for code rc on db, naming the file: "<path>: <sqlite message> (<what>)".
std::string message(sqlite3* db, const std::string& path, int rc, std::string_view what);

}  // namespace ml::sql
