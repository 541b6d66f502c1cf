/* dds_store_settings: what the library resolved from options and the
 * environment, with and without a store.
 *
 * A generated table: every combination of a few spellings (unset, each
 * accepted value, a malformed one) of the variables the report covers. For
 * each, the test's own reading of the documented rules gives the expected
 * report, or the variable a malformed value must be named by; then stores
 * are created with each batch-mode and gpu option, for methods 0 and 1, and
 * their reports are checked (options override the environment; methods 1
 * and 2 are always one-sided). */
#include <stdint.h>
#include <unistd.h>

#include "common.h"

/* One environment variable under test: its spellings and how the
 * documentation says each one reads (-1: malformed). */
typedef struct {
  const char *var;
  const char *spelling[5];
  int meaning[5];
  int n;
} env_case;

/* Switch values read 1/0; DDSTORE_BATCH_MODE reads DDS_BATCH_*; DDSTORE_GPU
 * reads DDS_GPU_*. NULL is "unset" (the default). */
static const env_case CASES[] = {
    {"DDSTORE_BATCH_MODE", {NULL, "collective", "OneSided", "one-sided", "both"},
     {DDS_BATCH_COLLECTIVE, DDS_BATCH_COLLECTIVE, DDS_BATCH_ONESIDED, DDS_BATCH_ONESIDED, -1}, 5},
    {"DDSTORE_GPU", {NULL, "0", "auto", "require", "maybe"}, {DDS_GPU_AUTO, DDS_GPU_OFF, DDS_GPU_AUTO, DDS_GPU_REQUIRE, -1}, 5},
    {"DDSTORE_PROFILE", {NULL, "1", "off", "2"}, {0, 1, 0, -1}, 4},
    {"DDSTORE_NODE_LOCAL", {NULL, "no", "yes"}, {1, 0, 1}, 3},
    {"DDSTORE_GPU_STAGING", {NULL, "0", "sometimes"}, {1, 0, -1}, 3},
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

static void set(const char *var, const char *value) {
  if (value)
    setenv(var, value, 1);
  else
    unsetenv(var);
}

static dds_settings report(dds_store *s, dds_status *rc) {
  dds_settings out;
  memset(&out, 0x5a, sizeof out);
  out.struct_size = sizeof out;
  *rc = dds_store_settings(s, &out);
  return out;
}

/* Stores made with each option under the current (well-formed) environment;
 * `env` is the report without a store. GPU support is not required here
 * (no GPU in CI), so `require` stays out of the options. */
static void check_stores(const dds_settings *env) {
  const int batch_opts[] = {DDS_BATCH_ENV, DDS_BATCH_COLLECTIVE, DDS_BATCH_ONESIDED};
  const int gpu_opts[] = {DDS_GPU_ENV, DDS_GPU_OFF, DDS_GPU_AUTO};
  for (int method = 0; method <= 1; method++)
    for (int b = 0; b < 3; b++)
      for (int g = 0; g < 3; g++) {
        if (env->gpu == DDS_GPU_REQUIRE && gpu_opts[g] == DDS_GPU_ENV)
          continue; /* would need a GPU driver */
        dds_options o;
        CHECK(dds_options_init(&o));
        o.method = method;
        o.batch_mode = batch_opts[b];
        o.gpu = gpu_opts[g];
        dds_store *s = NULL;
        CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
        dds_status rc;
        dds_settings got = report(s, &rc);
        EXPECT(rc == DDS_OK);
        int want_batch = method != 0                      ? DDS_BATCH_ONESIDED
                         : batch_opts[b] == DDS_BATCH_ENV ? env->batch_mode
                                                          : batch_opts[b];
        EXPECT(got.struct_size == sizeof got);
        EXPECT(got.method == method);
        EXPECT(got.role == DDS_ROLE_CORE);
        EXPECT(got.batch_mode == want_batch);
        EXPECT(got.gpu == (gpu_opts[g] == DDS_GPU_ENV ? env->gpu : gpu_opts[g]));
        EXPECT(got.gpu_staging == env->gpu_staging);
        EXPECT(got.profiling == env->profiling);
        EXPECT(got.node_local == env->node_local);
        EXPECT(got.mpi_progress == 0);
        EXPECT(strcmp(got.handshake_dir, env->handshake_dir) == 0);
        CHECK(dds_destroy(s));
      }
}

int main(int argc, char **argv) {
  t_init(&argc, &argv);
  int choice[N_CASES] = {0}, combos = 0;
  for (;;) {
    int want[N_CASES], bad = -1;
    for (int c = 0; c < N_CASES; c++) {
      set(CASES[c].var, CASES[c].spelling[choice[c]]);
      want[c] = CASES[c].meaning[choice[c]];
      if (want[c] < 0 && bad < 0)
        bad = c;
    }
    dds_status rc;
    dds_settings got = report(NULL, &rc);
    if (bad >= 0) {
      /* The library checks in its own order: it names one of the malformed. */
      int named = 0;
      for (int c = 0; c < N_CASES; c++)
        named |= want[c] < 0 && strstr(dds_last_error(), CASES[c].var) != NULL;
      EXPECT(rc == DDS_ERR_INVALID_ARGUMENT && named);
      if (rc != DDS_ERR_INVALID_ARGUMENT || !named)
        fprintf(stderr, "rank %d: %s=%s gave \"%s\"\n", t_rank, CASES[bad].var, CASES[bad].spelling[choice[bad]],
                dds_last_error());
    } else {
      EXPECT(rc == DDS_OK);
      EXPECT(got.method == DDS_METHOD_MPI && got.role == DDS_ROLE_CORE);
      EXPECT(got.batch_mode == want[0]);
      EXPECT(got.gpu == want[1]);
      EXPECT(got.profiling == want[2]);
      EXPECT(got.node_local == want[3]);
      EXPECT(got.gpu_staging == want[4]);
      EXPECT(strcmp(got.handshake_dir, "./ddstore_hs") == 0);
      /* Stores for a spread of the combinations (each one creates 18). */
      if (combos % 31 == 0)
        check_stores(&got);
    }
    combos++;
    int c = 0;
    while (c < N_CASES && ++choice[c] == CASES[c].n)
      choice[c++] = 0;
    if (c == N_CASES)
      break;
  }
  for (int c = 0; c < N_CASES; c++)
    unsetenv(CASES[c].var);

  /* The hand-shake directory: the environment's, and a method-2 store's
   * own option over it. */
  setenv("DDSTORE_HANDSHAKE_DIR", "/tmp/dds-settings-env", 1);
  dds_status rc;
  dds_settings got = report(NULL, &rc);
  EXPECT(rc == DDS_OK && strcmp(got.handshake_dir, "/tmp/dds-settings-env") == 0);
  long job = (long)getpid();
  MPI_Bcast(&job, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  char dir[128];
  snprintf(dir, sizeof dir, "/tmp/dds-settings-%ld", job);
  dds_options o;
  CHECK(dds_options_init(&o));
  o.method = DDS_METHOD_SPLIT;
  o.handshake_dir = dir;
  dds_store *s = NULL;
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  got = report(s, &rc);
  EXPECT(rc == DDS_OK && got.method == DDS_METHOD_SPLIT && got.role == DDS_ROLE_CORE);
  EXPECT(got.batch_mode == DDS_BATCH_ONESIDED);
  EXPECT(strcmp(got.handshake_dir, dir) == 0);
  CHECK(dds_destroy(s));
  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 0)
    rmdir(dir);

  /* The progress thread is reported when it runs (method 0 only). */
  setenv("DDSTORE_MPI_PROGRESS", "1", 1);
  CHECK(dds_options_init(&o));
  CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
  got = report(s, &rc);
  EXPECT(rc == DDS_OK && got.mpi_progress == 1);
  CHECK(dds_destroy(s));
  unsetenv("DDSTORE_MPI_PROGRESS");

  /* Settings the ranks agree on are reported as agreed, the same on every
   * rank and as dds_info has it (issue 35): node-local copies turned off on
   * the last rank only are off everywhere. */
  if (t_size > 1) {
    for (int method = 0; method <= 1; method++) {
      set("DDSTORE_NODE_LOCAL", t_rank == t_size - 1 ? "0" : NULL);
      CHECK(dds_options_init(&o));
      o.method = method;
      CHECK(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s));
      got = report(s, &rc);
      EXPECT(rc == DDS_OK && got.node_local == 0);
      double rows[2] = {1, 2};
      CHECK(dds_add(s, "v", rows, sizeof rows, 2, 1, 8));
      dds_var_info info;
      info.struct_size = sizeof info;
      CHECK(dds_info(s, "v", &info));
      EXPECT(info.node_local == got.node_local);
      CHECK(dds_destroy(s));
    }
    unsetenv("DDSTORE_NODE_LOCAL");
    /* The progress thread (method 0) on some ranks only: refused on every
     * rank, naming the variable, the ranks and their values. */
    set("DDSTORE_MPI_PROGRESS", t_rank == t_size - 1 ? "1" : NULL);
    CHECK(dds_options_init(&o));
    char want[128];
    snprintf(want, sizeof want, "rank 0 has auto, rank %d has 1 (on)", t_size - 1);
    EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_INVALID_ARGUMENT, want);
    EXPECT_ERR(dds_create(MPI_Comm_c2f(MPI_COMM_WORLD), &o, &s), DDS_ERR_INVALID_ARGUMENT,
               "DDSTORE_MPI_PROGRESS differs across ranks");
    unsetenv("DDSTORE_MPI_PROGRESS");
  }

  /* Bad arguments: NULL out, unsized out, a destroyed handle. */
  EXPECT_ERR(dds_store_settings(NULL, NULL), DDS_ERR_INVALID_ARGUMENT, "out is NULL");
  got.struct_size = sizeof got - 1;
  EXPECT_ERR(dds_store_settings(NULL, &got), DDS_ERR_INVALID_ARGUMENT, "dds_settings.struct_size");
  got.struct_size = 0;
  EXPECT_ERR(dds_store_settings(NULL, &got), DDS_ERR_INVALID_ARGUMENT, "dds_settings.struct_size");
  got.struct_size = sizeof got;
  EXPECT_ERR(dds_store_settings(s, &got), DDS_ERR_BAD_STATE, "");
  /* A directory longer than the report holds. */
  char longdir[DDS_SETTINGS_PATH_BYTES + 8];
  memset(longdir, 'd', sizeof longdir - 1);
  longdir[0] = '/';
  longdir[sizeof longdir - 1] = '\0';
  setenv("DDSTORE_HANDSHAKE_DIR", longdir, 1);
  EXPECT_ERR(dds_store_settings(NULL, &got), DDS_ERR_MISMATCH, "bytes; dds_settings holds at most 4095");
  longdir[DDS_SETTINGS_PATH_BYTES - 1] = '\0'; /* exactly 4095 bytes: fits */
  setenv("DDSTORE_HANDSHAKE_DIR", longdir, 1);
  got = report(NULL, &rc);
  EXPECT(rc == DDS_OK && strlen(got.handshake_dir) == DDS_SETTINGS_PATH_BYTES - 1);
  longdir[DDS_SETTINGS_PATH_BYTES - 1] = 'd'; /* 4096: one past */
  longdir[DDS_SETTINGS_PATH_BYTES] = '\0';
  setenv("DDSTORE_HANDSHAKE_DIR", longdir, 1);
  EXPECT_ERR(dds_store_settings(NULL, &got), DDS_ERR_MISMATCH, "4096 bytes");
  unsetenv("DDSTORE_HANDSHAKE_DIR");
  if (t_rank == 0)
    printf("test_settings: %d environment combinations\n", combos);
  return t_finish("test_settings");
}
