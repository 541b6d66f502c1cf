/* Facts about the C header for test_fortran_layout.f90: struct sizes, field
 * offsets and constant values, in the order that test expects them. */
#include <stddef.h>
#include <stdint.h>

#include "ddstore.h"

/* Writes at most `cap` values to `out` and returns how many there are. */
int32_t dds_test_c_layout(int64_t *out, int32_t cap) {
  const int64_t facts[] = {
      /* dds_options */
      sizeof(dds_options), offsetof(dds_options, struct_size), offsetof(dds_options, method),
      offsetof(dds_options, role), offsetof(dds_options, width), offsetof(dds_options, n_core),
      offsetof(dds_options, handshake_dir), offsetof(dds_options, fabric_provider),
      offsetof(dds_options, fabric_iface), offsetof(dds_options, nic_map), offsetof(dds_options, gpu),
      offsetof(dds_options, gpu_staging), offsetof(dds_options, batch_mode),
      /* dds_var_info */
      sizeof(dds_var_info), offsetof(dds_var_info, struct_size), offsetof(dds_var_info, item_size),
      offsetof(dds_var_info, total_rows), offsetof(dds_var_info, local_rows), offsetof(dds_var_info, row_elems),
      offsetof(dds_var_info, row_bytes), offsetof(dds_var_info, method), offsetof(dds_var_info, n_ranks),
      offsetof(dds_var_info, transport), sizeof(((dds_var_info *)0)->transport),
      offsetof(dds_var_info, node_local), offsetof(dds_var_info, node_ranks),
      offsetof(dds_var_info, is_ragged), offsetof(dds_var_info, total_samples),
      offsetof(dds_var_info, local_samples), offsetof(dds_var_info, total_items),
      /* dds_counters */
      sizeof(dds_counters), offsetof(dds_counters, struct_size), offsetof(dds_counters, profiling),
      offsetof(dds_counters, calls), offsetof(dds_counters, rows), offsetof(dds_counters, bytes),
      offsetof(dds_counters, rows_local), offsetof(dds_counters, rows_remote),
      offsetof(dds_counters, lock_wait_ns), offsetof(dds_counters, mr_ns), offsetof(dds_counters, mr_miss),
      offsetof(dds_counters, read_ns), offsetof(dds_counters, cq_ns), offsetof(dds_counters, req_bytes_sent),
      offsetof(dds_counters, req_bytes_recv), offsetof(dds_counters, batch_mode), offsetof(dds_counters, batch_checks),
      offsetof(dds_counters, batch_calls_onesided),
      /* dds_settings */
      sizeof(dds_settings), offsetof(dds_settings, struct_size), offsetof(dds_settings, method),
      offsetof(dds_settings, role), offsetof(dds_settings, batch_mode), offsetof(dds_settings, gpu),
      offsetof(dds_settings, gpu_staging), offsetof(dds_settings, profiling), offsetof(dds_settings, node_local),
      offsetof(dds_settings, mpi_progress), offsetof(dds_settings, handshake_dir),
      sizeof(((dds_settings *)0)->handshake_dir), DDS_SETTINGS_PATH_BYTES,
      /* constants */
      DDS_OK, DDS_ERR_INVALID_ARGUMENT, DDS_ERR_UNKNOWN_VARIABLE, DDS_ERR_DUPLICATE_VARIABLE,
      DDS_ERR_INDEX_OUT_OF_RANGE, DDS_ERR_MISMATCH, DDS_ERR_BAD_STATE, DDS_ERR_UNSUPPORTED, DDS_ERR_MPI,
      DDS_ERR_FABRIC, DDS_ERR_GPU, DDS_ERR_TIMEOUT, DDS_ERR_NO_MEMORY, DDS_ERR_IO, DDS_ERR_INTERNAL,
      DDS_METHOD_MPI, DDS_METHOD_FABRIC, DDS_METHOD_SPLIT, DDS_ROLE_CORE, DDS_ROLE_EXTRA,
      DDS_BATCH_ENV, DDS_BATCH_COLLECTIVE, DDS_BATCH_ONESIDED, DDS_BATCH_AUTO,
      /* sizes of the C types behind the Fortran kinds used by the module */
      sizeof(int), sizeof(size_t), sizeof(void *), sizeof(enum dds_status)};
  int32_t n = (int32_t)(sizeof facts / sizeof facts[0]);
  for (int32_t i = 0; i < n && i < cap; i++) out[i] = facts[i];
  return n;
}
