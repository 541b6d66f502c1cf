/* The bad-input matrix: every case checks the exact status and the message
 * content, and after each group the store still returns every row intact.
 * Collective calls must fail on every rank together, even when only one
 * rank passed a bad argument. */
#include <stddef.h>
#include <stdint.h>

#include "common.h"

static const int64_t ELEMS = 4;
static int64_t total_rows(void) { return 4 * (int64_t)t_size; }

/* A store with variable "v" (4 rows per rank, 4 doubles per row). */
static dds_store *make_store(void) {
  dds_store *s = t_store(DDS_METHOD_MPI, 0);
  double buf[4 * 4];
  t_fill(buf, 4, ELEMS, 8, 1, 4 * (int64_t)t_rank);
  CHECK(dds_add(s, "v", buf, sizeof buf, 4, ELEMS, 8));
  return s;
}

/* Every row of "v" reads back intact, singly and as one batch. */
static void expect_intact(dds_store *s) {
  int64_t n = total_rows();
  double *all = malloc(sizeof(double) * (size_t)(n * ELEMS));
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
  for (int64_t g = 0; g < n; g++) idx[g] = n - 1 - g;
  CHECK(dds_get_batch(s, "v", all, sizeof(double) * (size_t)(n * ELEMS), idx, n));
  EXPECT(t_rows_ok(all, n, ELEMS, 8, 1, idx, 0));
  for (int64_t g = 0; g < n; g++) {
    CHECK(dds_get(s, "v", all, sizeof(double) * ELEMS, g, 1));
    EXPECT(t_rows_ok(all, 1, ELEMS, 8, 1, NULL, g));
  }
  free(all);
  free(idx);
}

/* Environment values outside their documented ranges and switches spelt
 * any other way (docs/environment.md) fail dds_create on every rank naming
 * the variable; a malformed NIC map fails a method-1 store even when
 * FABRIC_IFACE is set (it used to be ignored then). */
static void env_errors(void) {
  int comm = MPI_Comm_c2f(MPI_COMM_WORLD);
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_FABRIC;
  static const struct { const char *var, *value, *part; } bad[] = {
      /* 1e300 seconds used to panic making a Duration (DDS_ERR_INTERNAL). */
      {"DDSTORE_READ_TIMEOUT_S", "1e300", "DDSTORE_READ_TIMEOUT_S=\"1e300\" is not a number of seconds in [0, 31536000]"},
      {"DDSTORE_HANDSHAKE_TIMEOUT_S", "1e300", "DDSTORE_HANDSHAKE_TIMEOUT_S=\"1e300\" is not a number of seconds in [0, "},
      {"DDSTORE_MAX_READ_BYTES", "18446744073709551615", "DDSTORE_MAX_READ_BYTES=\"18446744073709551615\" is not a whole number of bytes in [1, 1099511627776]"},
      {"DDSTORE_TEST_NODE_LOCAL_WIDTH", "0", "DDSTORE_TEST_NODE_LOCAL_WIDTH=\"0\" is not a whole number of ranks in [1, 2147483647]"},
      /* Any value but "0" used to turn these on. */
      {"DDSTORE_PROFILE", "maybe", "DDSTORE_PROFILE=\"maybe\" is not a switch: use 1/0, on/off, true/false or yes/no"},
      {"DDSTORE_TEST_FABRIC_LOCAL_MR", "2", "DDSTORE_TEST_FABRIC_LOCAL_MR=\"2\" is not a switch"},
      {"DDSTORE_NODE_LOCAL", "enable", "DDSTORE_NODE_LOCAL=\"enable\" is not a switch"},
      {"DDSTORE_GPU_STAGING", "y", "DDSTORE_GPU_STAGING=\"y\" is not a switch"},
      {"DDSTORE_NIC_MAP", "garbage;;=", "DDSTORE_NIC_MAP entry 'garbage' is not nic=cpus"},
      {"DDSTORE_NIC_MAP", "lo=0;=", "DDSTORE_NIC_MAP entry '=' has no NIC name"},
      /* A testing aid's name from before the DDSTORE_TEST_ prefix. */
      {"DDSTORE_NODE_LOCAL_WIDTH", "2", "DDSTORE_NODE_LOCAL_WIDTH is no longer read: it is a testing aid now named DDSTORE_TEST_NODE_LOCAL_WIDTH"},
  };
  /* An interface is named (the node's own when the tests run across nodes). */
  setenv("FABRIC_IFACE", "lo", 0);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv(bad[i].var, bad[i].value, 1);
    EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, bad[i].part);
    unsetenv(bad[i].var);
  }
  o.nic_map = "hsn0=0-3;nic-without-cpus";
  EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, "options.nic_map entry 'nic-without-cpus' is not nic=cpus");
  o.nic_map = NULL;
  /* "off" is off, for every switch. */
  setenv("DDSTORE_PROFILE", "off", 1);
  setenv("DDSTORE_TEST_FABRIC_LOCAL_MR", "OFF", 1);
  CHECK(dds_create(comm, NULL, &s));
  unsetenv("DDSTORE_PROFILE");
  unsetenv("DDSTORE_TEST_FABRIC_LOCAL_MR");
  double row[2] = {1, 2};
  CHECK(dds_add(s, "p", row, sizeof row, 1, 2, 8));
  CHECK(dds_get(s, "p", row, sizeof row, 0, 1));
  dds_counters c = {.struct_size = sizeof c};
  CHECK(dds_profile(s, "p", &c));
  EXPECT(c.profiling == 0 && c.read_ns == 0 && c.mr_miss == 0);
  CHECK(dds_destroy(s));
  s = NULL;
  setenv("DDSTORE_PROFILE", "Yes", 1);
  CHECK(dds_create(comm, NULL, &s));
  unsetenv("DDSTORE_PROFILE");
  CHECK(dds_add(s, "p", row, sizeof row, 1, 2, 8));
  CHECK(dds_profile(s, "p", &c));
  EXPECT(c.profiling == 1);
  CHECK(dds_destroy(s));
}

/* A method-2 extra member is created locally (comm_f ignored): its errors
 * must come back at once, without a collective on comm_f, even when the
 * rest of the options does not decode. MPI_COMM_NULL shows the difference:
 * the collective path used to fail on it ("MPI_COMM_NULL") or, with a real
 * communicator, wait in MPI_Comm_dup for ranks that never come. */
static void extra_create_errors(void) {
  int null_comm = MPI_Comm_c2f(MPI_COMM_NULL);
  dds_options o;
  dds_store *s = NULL;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_EXTRA;
  o.n_core = 2;
  EXPECT_ERR(dds_create(null_comm, &o, NULL), DDS_ERR_INVALID_ARGUMENT, "out (where the handle is written) is NULL");
  o.fabric_provider = "\xff\xfe";
  EXPECT_ERR(dds_create(null_comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, "option fabric_provider is not valid UTF-8");
  o.fabric_provider = NULL;
  o.struct_size = (uint32_t)(offsetof(dds_options, role) + sizeof o.role);
  EXPECT_ERR(dds_create(null_comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, "options.struct_size is");
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.role = DDS_ROLE_EXTRA;
  o.n_core = 0;
  EXPECT_ERR(dds_create(null_comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, "needs n_core > 0");
}

static void create_errors(void) {
  int comm = MPI_Comm_c2f(MPI_COMM_WORLD);
  dds_options o;
  dds_store *s = NULL;
  EXPECT_ERR(dds_options_init(NULL), DDS_ERR_INVALID_ARGUMENT, "options is NULL");
  CHECK(dds_options_init(&o));
  EXPECT_ERR(dds_create(comm, &o, NULL), DDS_ERR_INVALID_ARGUMENT, "out");
  o.struct_size = 0;
  EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, "struct_size");
  CHECK(dds_options_init(&o));
  o.method = 7;
  EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, "method 7");
  CHECK(dds_options_init(&o));
  o.width = -1;
  EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, "width -1");
  CHECK(dds_options_init(&o));
  o.role = 5;
  EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, "role 5");
  /* Only the last rank passes a bad method: every rank fails, naming it. */
  CHECK(dds_options_init(&o));
  if (t_rank == t_size - 1) o.method = 9;
  char who[32];
  snprintf(who, sizeof who, "rank %d: method 9", t_size - 1);
  EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, who);
  /* Options that are valid everywhere but differ across ranks. */
  if (t_size > 1) {
    CHECK(dds_options_init(&o));
    o.width = t_rank == 0 ? 1 : 2;
    EXPECT_ERR(dds_create(comm, &o, &s), DDS_ERR_INVALID_ARGUMENT, "width differs across ranks");
    setenv("DDSTORE_ALLTOALL_MAX_BYTES", t_rank == 0 ? "4096" : "8192", 1);
    EXPECT_ERR(dds_create(comm, NULL, &s), DDS_ERR_INVALID_ARGUMENT, "DDSTORE_ALLTOALL_MAX_BYTES differs");
    unsetenv("DDSTORE_ALLTOALL_MAX_BYTES");
    /* Ranks moving batch rows different ways could not match each other. */
    setenv("DDSTORE_BATCH_EXCHANGE", t_rank == 0 ? "sendrecv" : "alltoallv", 1);
    EXPECT_ERR(dds_create(comm, NULL, &s), DDS_ERR_INVALID_ARGUMENT, "DDSTORE_BATCH_EXCHANGE differs");
    unsetenv("DDSTORE_BATCH_EXCHANGE");
  }
  setenv("DDSTORE_BATCH_EXCHANGE", "p2p", 1);
  EXPECT_ERR(dds_create(comm, NULL, &s), DDS_ERR_INVALID_ARGUMENT, "DDSTORE_BATCH_EXCHANGE=\"p2p\" is not one of");
  unsetenv("DDSTORE_BATCH_EXCHANGE");
  setenv("DDSTORE_ALLTOALL_MAX_BYTES", "lots", 1);
  EXPECT_ERR(dds_create(comm, NULL, &s), DDS_ERR_INVALID_ARGUMENT, "DDSTORE_ALLTOALL_MAX_BYTES=\"lots\"");
  unsetenv("DDSTORE_ALLTOALL_MAX_BYTES");
  EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_NULL), NULL, &s), DDS_ERR_INVALID_ARGUMENT, "MPI_COMM_NULL");
  EXPECT(s == NULL); /* outputs are written only on success */
  env_errors();
  extra_create_errors();
  EXPECT(s == NULL);
  EXPECT(dds_destroy(NULL) == DDS_OK);
}

static void handle_errors(void) {
  double row[4];
  dds_store *bogus = (dds_store *)(uintptr_t)0x12345670;
  EXPECT_ERR(dds_get(bogus, "v", row, sizeof row, 0, 1), DDS_ERR_BAD_STATE, "not a live store");
  EXPECT_ERR(dds_get(NULL, "v", row, sizeof row, 0, 1), DDS_ERR_INVALID_ARGUMENT, "store handle is NULL");
  EXPECT_ERR(dds_epoch_begin(bogus), DDS_ERR_BAD_STATE, "not a live store");
  EXPECT_ERR(dds_destroy(bogus), DDS_ERR_BAD_STATE, "not a live store");
  /* Use after destroy and destroy twice. */
  dds_store *s = make_store();
  CHECK(dds_destroy(s));
  EXPECT_ERR(dds_get(s, "v", row, sizeof row, 0, 1), DDS_ERR_BAD_STATE, "not a live store");
  EXPECT_ERR(dds_update(s, "v", row, sizeof row, 0), DDS_ERR_BAD_STATE, "not a live store");
  EXPECT_ERR(dds_destroy(s), DDS_ERR_BAD_STATE, "destroyed twice");
  EXPECT(strcmp(dds_status_string(DDS_ERR_MISMATCH), "DDS_ERR_MISMATCH") == 0);
  EXPECT(strcmp(dds_status_string(999), "DDS_ERR_UNKNOWN_STATUS") == 0);
}

/* A handle of one kind passed as another (issue 35): refused with
 * DDS_ERR_INVALID_ARGUMENT naming the kind expected, never acted on, live
 * or not. No two handles are equal, whatever their kind. */
static void handle_kinds(void) {
  dds_store *s = make_store();
  double rows[2 * ELEMS], row[ELEMS];
  int64_t idx[2] = {0, 1};
  dds_request *req = NULL;
  CHECK(dds_get_batch_start(s, "v", rows, sizeof rows, idx, 2, &req));
  EXPECT((void *)req != (void *)s);
  dds_store *as_store = (dds_store *)req;
  dds_request *as_req = (dds_request *)s;
  const char *not_store = "is a request handle (dds_request *), not a store handle (dds_store *)";
  const char *not_req = "is a store handle (dds_store *), not a request handle (dds_request *)";
  dds_var_info info;
  info.struct_size = sizeof info;
  EXPECT_ERR(dds_info(as_store, "v", &info), DDS_ERR_INVALID_ARGUMENT, not_store);
  EXPECT_ERR(dds_get(as_store, "v", row, sizeof row, 0, 1), DDS_ERR_INVALID_ARGUMENT, not_store);
  EXPECT_ERR(dds_destroy(as_store), DDS_ERR_INVALID_ARGUMENT, not_store);
  EXPECT_ERR(dds_epoch_begin(as_store), DDS_ERR_INVALID_ARGUMENT, not_store);
  int done = 0;
  EXPECT_ERR(dds_request_test(as_req, &done), DDS_ERR_INVALID_ARGUMENT, not_req);
  EXPECT_ERR(dds_request_wait(as_req), DDS_ERR_INVALID_ARGUMENT, not_req);
  EXPECT_ERR(dds_request_free(as_req), DDS_ERR_INVALID_ARGUMENT, not_req);
  /* Both still work as what they are. */
  CHECK(dds_request_wait(req));
  EXPECT(t_rows_ok(rows, 2, ELEMS, 8, 1, idx, 0));
  CHECK(dds_info(s, "v", &info));
  /* A request already waited for is still not a store, nor a store a request. */
  EXPECT_ERR(dds_info(as_store, "v", &info), DDS_ERR_INVALID_ARGUMENT, not_store);
  CHECK(dds_destroy(s));
  EXPECT_ERR(dds_request_wait(as_req), DDS_ERR_INVALID_ARGUMENT, not_req);
}

static void register_errors(dds_store *s) {
  double buf[4 * 4];
  char longname[300];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  EXPECT_ERR(dds_init(s, NULL, 4, 4, 8), DDS_ERR_INVALID_ARGUMENT, "name is NULL");
  EXPECT_ERR(dds_init(s, "", 4, 4, 8), DDS_ERR_INVALID_ARGUMENT, "empty");
  EXPECT_ERR(dds_init(s, longname, 4, 4, 8), DDS_ERR_INVALID_ARGUMENT, "longer than 255");
  EXPECT_ERR(dds_init(s, "bad\xff\xfe", 4, 4, 8), DDS_ERR_INVALID_ARGUMENT, "UTF-8");
  EXPECT_ERR(dds_init(s, "w", -1, 4, 8), DDS_ERR_INVALID_ARGUMENT, "row count -1 is negative");
  EXPECT_ERR(dds_init(s, "w", 4, 0, 8), DDS_ERR_INVALID_ARGUMENT, "elements per row must be positive");
  EXPECT_ERR(dds_init(s, "w", 4, -3, 8), DDS_ERR_INVALID_ARGUMENT, "got -3");
  EXPECT_ERR(dds_init(s, "w", 4, 4, 3), DDS_ERR_INVALID_ARGUMENT, "item size 3");
  EXPECT_ERR(dds_init(s, "w", 4, 4, 0), DDS_ERR_INVALID_ARGUMENT, "item size 0");
  EXPECT_ERR(dds_init(s, "w", 4, 4, 16), DDS_ERR_INVALID_ARGUMENT, "item size 16");
  EXPECT_ERR(dds_init(s, "w", INT64_MAX / 2, 8, 8), DDS_ERR_INVALID_ARGUMENT, "overflows");
  EXPECT_ERR(dds_init(s, "w", 1, INT64_MAX, 8), DDS_ERR_INVALID_ARGUMENT, "overflows 64 bits");
  EXPECT_ERR(dds_init(s, "v", 4, 4, 8), DDS_ERR_DUPLICATE_VARIABLE, "'v' already exists");
  EXPECT_ERR(dds_add(s, "w", buf, sizeof buf - 8, 4, 4, 8), DDS_ERR_MISMATCH, "data_bytes is 120");
  EXPECT_ERR(dds_add(s, "w", NULL, sizeof buf, 4, 4, 8), DDS_ERR_INVALID_ARGUMENT, "data is NULL");
  /* One bad rank fails the collective everywhere, naming that rank. */
  char who[64];
  snprintf(who, sizeof who, "rank %d: variable 'w': item size 5", t_size - 1);
  EXPECT_ERR(dds_init(s, "w", 4, 4, t_rank == t_size - 1 ? 5 : 8), DDS_ERR_INVALID_ARGUMENT, who);
  if (t_size > 1) {
    EXPECT_ERR(dds_init(s, "w", 4, t_rank == 1 ? 3 : 2, 8), DDS_ERR_MISMATCH, "rank 1 has rows of 3 elements");
    EXPECT_ERR(dds_init(s, t_rank == 0 ? "w0" : "w1", 4, 2, 8), DDS_ERR_INVALID_ARGUMENT, "different variable names");
  }
  /* The failed registrations left nothing behind: "w" is still free. */
  CHECK(dds_init(s, "w", 1, 1, 1));
}

/* Refused calls write no output: handles, structs and destinations keep
 * the caller's bytes (a sentinel here). */
static void outputs_untouched(dds_store *s) {
  int comm = MPI_Comm_c2f(MPI_COMM_WORLD);
  dds_options o;
  CHECK(dds_options_init(&o));
  o.method = 9;
  dds_store *sentinel = (dds_store *)(uintptr_t)0xdd5, *out = sentinel;
  EXPECT_ERR(dds_create(comm, &o, &out), DDS_ERR_INVALID_ARGUMENT, "method 9");
  EXPECT(out == sentinel);
  dds_var_info info, blank;
  memset(&info, 0xdd, sizeof info);
  info.struct_size = sizeof info;
  blank = info;
  EXPECT_ERR(dds_info(s, "nope", &info), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
  EXPECT(memcmp(&info, &blank, sizeof info) == 0);
  dds_counters c, cblank;
  memset(&c, 0xdd, sizeof c);
  c.struct_size = sizeof c;
  cblank = c;
  EXPECT_ERR(dds_profile(s, "nope", &c), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
  EXPECT(memcmp(&c, &cblank, sizeof c) == 0);
  double row[2 * 4], want[2 * 4];
  memset(row, 0xdd, sizeof row);
  memcpy(want, row, sizeof row);
  const int64_t n = total_rows();
  EXPECT_ERR(dds_get(s, "v", row, sizeof row, n, 2), DDS_ERR_INDEX_OUT_OF_RANGE, "");
  EXPECT_ERR(dds_get(s, "v", row, sizeof row - 1, 0, 2), DDS_ERR_MISMATCH, "");
  int64_t idx[2] = {0, n}; /* the second is past the end: nothing is written */
  EXPECT_ERR(dds_get_batch(s, "v", row, sizeof row, idx, 2), DDS_ERR_INDEX_OUT_OF_RANGE, "");
  EXPECT(memcmp(row, want, sizeof row) == 0);
}

static void read_errors(dds_store *s) {
  double row[4], two[8];
  const size_t rb = sizeof row;
  int64_t n = total_rows();
  EXPECT_ERR(dds_get(s, "nope", row, rb, 0, 1), DDS_ERR_UNKNOWN_VARIABLE, "no variable named 'nope'");
  EXPECT_ERR(dds_get(s, "v", row, rb, -1, 1), DDS_ERR_INDEX_OUT_OF_RANGE, "global row -1 is out of range");
  char range[64];
  snprintf(range, sizeof range, "global row %lld is out of range [0, %lld)", (long long)n, (long long)n);
  EXPECT_ERR(dds_get(s, "v", row, rb, n, 1), DDS_ERR_INDEX_OUT_OF_RANGE, range);
  EXPECT_ERR(dds_get(s, "v", row, rb, INT64_MAX, 1), DDS_ERR_INDEX_OUT_OF_RANGE, "out of range");
  /* An empty read moves nothing, but its start must lie in [0, total]. */
  EXPECT(dds_get(s, "v", row, 0, n, 0) == DDS_OK && dds_get(s, "v", NULL, 0, 0, 0) == DDS_OK);
  EXPECT_ERR(dds_get(s, "v", row, 0, -1, 0), DDS_ERR_INDEX_OUT_OF_RANGE, "start -1 of a 0-row read");
  EXPECT_ERR(dds_get(s, "v", row, 0, n + 1, 0), DDS_ERR_INDEX_OUT_OF_RANGE, "of a 0-row read is outside");
  EXPECT_ERR(dds_get(s, "v", row, 0, INT64_MIN, 0), DDS_ERR_INDEX_OUT_OF_RANGE, "0-row read");
  EXPECT_ERR(dds_get(s, "v", row, rb - 1, 0, 1), DDS_ERR_MISMATCH, "destination of 31 bytes");
  EXPECT_ERR(dds_get(s, "v", two, rb + 8, 0, 1), DDS_ERR_MISMATCH, "need 32 bytes");
  EXPECT_ERR(dds_get(s, "v", two, 2 * rb, 3, 2), DDS_ERR_INVALID_ARGUMENT, "cross the end of rank 0's shard");
  EXPECT_ERR(dds_get(s, "v", row, rb, 0, -2), DDS_ERR_INVALID_ARGUMENT, "count -2 is negative");
  EXPECT_ERR(dds_get(s, "v", NULL, rb, 0, 1), DDS_ERR_INVALID_ARGUMENT, "dst is NULL");
  EXPECT_ERR(dds_get(s, NULL, row, rb, 0, 1), DDS_ERR_INVALID_ARGUMENT, "name is NULL");
  /* Updates are local and bounds-checked. */
  EXPECT_ERR(dds_update(s, "v", two, 2 * rb, 3), DDS_ERR_INDEX_OUT_OF_RANGE, "rows [3, 5) of 'v' are outside");
  EXPECT_ERR(dds_update(s, "v", row, rb, -1), DDS_ERR_INDEX_OUT_OF_RANGE, "outside this rank's shard of 4 rows");
  EXPECT_ERR(dds_update(s, "v", row, rb - 4, 0), DDS_ERR_MISMATCH, "not a whole number of 32-byte rows");
  EXPECT_ERR(dds_update(s, "nope", row, rb, 0), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
  EXPECT_ERR(dds_update(s, "v", NULL, rb, 0), DDS_ERR_INVALID_ARGUMENT, "data is NULL");
}

static void batch_errors(dds_store *s) {
  double two[8];
  const size_t rb = 4 * sizeof(double);
  int64_t n = total_rows(), idx[2] = {0, n - 1};
  char who[96];
  int64_t bad[2] = {0, t_rank == t_size - 1 ? n + 5 : 1};
  if (t_batch_collective()) {
    /* An index out of range on the last rank only: all ranks fail together. */
    snprintf(who, sizeof who, "rank %d: index 1 of its batch, global row %lld, is out of range", t_size - 1,
             (long long)(n + 5));
    EXPECT_ERR(dds_get_batch(s, "v", two, 2 * rb, bad, 2), DDS_ERR_INDEX_OUT_OF_RANGE, who);
  } else if (t_rank == t_size - 1) {
    /* One-sided batches (methods 1, 2, method 0 with DDSTORE_BATCH_MODE=onesided):
     * only the rank with the bad index fails. */
    snprintf(who, sizeof who, "index 1 of the batch, global row %lld, is out of range", (long long)(n + 5));
    EXPECT_ERR(dds_get_batch(s, "v", two, 2 * rb, bad, 2), DDS_ERR_INDEX_OUT_OF_RANGE, who);
  } else {
    CHECK(dds_get_batch(s, "v", two, 2 * rb, bad, 2));
    EXPECT(t_rows_ok(two, 2, ELEMS, 8, 1, bad, 0));
  }
  int64_t neg[1] = {-1};
  EXPECT_ERR(dds_get_batch(s, "v", two, rb, neg, 1), DDS_ERR_INDEX_OUT_OF_RANGE, "global row -1");
  /* A destination of the wrong size on rank 0 only. */
  if (t_batch_collective())
    EXPECT_ERR(dds_get_batch(s, "v", two, t_rank == 0 ? rb : 2 * rb, idx, 2), DDS_ERR_MISMATCH,
               "rank 0: destination of 32 bytes");
  else if (t_rank == 0)
    EXPECT_ERR(dds_get_batch(s, "v", two, rb, idx, 2), DDS_ERR_MISMATCH, "destination of 32 bytes");
  EXPECT_ERR(dds_get_batch(s, "v", two, 2 * rb + 8, idx, 2), DDS_ERR_MISMATCH, "need 64 bytes");
  EXPECT_ERR(dds_get_batch(s, "nope", two, 2 * rb, idx, 2), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
  EXPECT_ERR(dds_get_batch(s, "v", two, 2 * rb, idx, -1), DDS_ERR_INVALID_ARGUMENT, "n -1 is negative");
  EXPECT_ERR(dds_get_batch(s, "v", two, 2 * rb, NULL, 2), DDS_ERR_INVALID_ARGUMENT, "indices is NULL");
  EXPECT_ERR(dds_get_batch(s, "v", NULL, 2 * rb, idx, 2), DDS_ERR_INVALID_ARGUMENT, "dst is NULL");
  if (t_size > 1 && t_batch_collective()) /* ranks naming different variables (collective batches only) */
    EXPECT_ERR(dds_get_batch(s, t_rank == 0 ? "v" : "w", two, t_rank == 0 ? 2 * rb : 2, idx, 2),
               DDS_ERR_INVALID_ARGUMENT, "different variables");
}

static void state_errors(dds_store *s) {
  double buf[4 * 4];
  EXPECT_ERR(dds_epoch_end(s), DDS_ERR_BAD_STATE, "no epoch is open");
  CHECK(dds_epoch_begin(s));
  EXPECT_ERR(dds_epoch_begin(s), DDS_ERR_BAD_STATE, "already open");
  CHECK(dds_epoch_end(s));
  EXPECT_ERR(dds_join(s, "v"), DDS_ERR_BAD_STATE, "only valid for method-2 extra members");
  /* Registered destinations. */
  EXPECT_ERR(dds_register_recv(s, "v", NULL, 64), DDS_ERR_INVALID_ARGUMENT, "buf is NULL");
  EXPECT_ERR(dds_register_recv(s, "nope", buf, 64), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
  CHECK(dds_register_recv(s, "v", buf, 64));
  CHECK(dds_register_recv(s, "v", buf, 64)); /* identical: no-op */
  EXPECT_ERR(dds_register_recv(s, "v", buf + 4, 64), DDS_ERR_INVALID_ARGUMENT, "overlaps");
  CHECK(dds_register_recv(s, "v", buf + 8, 64)); /* adjacent: fine */
  double got[4];
  CHECK(dds_get(s, "v", buf + 8, 32, 1, 1)); /* a read into a registered slice */
  memcpy(got, buf + 8, sizeof got);
  EXPECT(t_rows_ok(got, 1, ELEMS, 8, 1, NULL, 1));
  CHECK(dds_unregister_recv(s, "v", buf));
  EXPECT_ERR(dds_unregister_recv(s, "v", buf), DDS_ERR_INVALID_ARGUMENT, "is not registered for 'v'");
  EXPECT_ERR(dds_unregister_recv(s, "v", buf + 1), DDS_ERR_INVALID_ARGUMENT, "not registered");
  CHECK(dds_unregister_recv(s, "v", buf + 8));
  /* Ranges whose end passes the address space are refused (the overlap test
   * used to wrap: both were accepted, then shared one start). The pointers
   * are never dereferenced. */
  EXPECT_ERR(dds_register_recv(s, "v", buf, SIZE_MAX), DDS_ERR_INVALID_ARGUMENT, "bytes 18446744073709551615");
  EXPECT_ERR(dds_register_recv(s, "v", buf, (size_t)PTRDIFF_MAX + 1), DDS_ERR_INVALID_ARGUMENT, "buf + bytes must not overflow");
  void *top = (void *)(UINTPTR_MAX - 10);
  EXPECT_ERR(dds_register_recv(s, "v", top, 40), DDS_ERR_INVALID_ARGUMENT, "past the address space");
  EXPECT_ERR(dds_unregister_recv(s, "v", buf), DDS_ERR_INVALID_ARGUMENT, "is not registered");
  EXPECT_ERR(dds_unregister_recv(s, "v", top), DDS_ERR_INVALID_ARGUMENT, "is not registered");
  CHECK(dds_register_recv(s, "v", buf, 64)); /* still usable, and unregistered once */
  CHECK(dds_unregister_recv(s, "v", buf));
  EXPECT_ERR(dds_unregister_recv(s, "v", buf), DDS_ERR_INVALID_ARGUMENT, "is not registered");
  /* Output structs must be sized by the caller. */
  dds_var_info info = {.struct_size = 0};
  dds_counters c = {.struct_size = 0};
  EXPECT_ERR(dds_info(s, "v", &info), DDS_ERR_INVALID_ARGUMENT, "dds_var_info.struct_size is 0");
  EXPECT_ERR(dds_info(s, "v", NULL), DDS_ERR_INVALID_ARGUMENT, "out is NULL");
  EXPECT_ERR(dds_profile(s, "v", &c), DDS_ERR_INVALID_ARGUMENT, "dds_counters.struct_size");
  info.struct_size = sizeof info;
  EXPECT_ERR(dds_info(s, "nope", &info), DDS_ERR_UNKNOWN_VARIABLE, "'nope'");
  /* Messages name the function. */
  dds_get(s, "nope", buf, 32, 0, 1);
  EXPECT(strncmp(dds_last_error(), "dds_get: ", 9) == 0);
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  create_errors();
  handle_errors();
  handle_kinds();
  dds_store *s = make_store();
  register_errors(s);
  expect_intact(s);
  read_errors(s);
  outputs_untouched(s);
  expect_intact(s);
  batch_errors(s);
  expect_intact(s);
  state_errors(s);
  expect_intact(s);
  CHECK(dds_destroy(s));
  return t_finish("test_errors");
}
