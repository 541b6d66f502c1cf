/* Proves the simulated nodes are nodes to MPI: MPI_Comm_split_type(SHARED)
 * must group the ranks by host name, and a message must cross every pair of
 * nodes. Run before anything of the library (scripts/cluster/test-cluster.sh).
 * Prints "split_type OK: N ranks on M nodes" on rank 0; exits 1 otherwise. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME_LEN 64

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int expect_nodes = argc > 1 ? atoi(argv[1]) : -1;

    char name[NAME_LEN] = {0};
    gethostname(name, NAME_LEN - 1);
    char *all = calloc((size_t)size, NAME_LEN);
    MPI_Allgather(name, NAME_LEN, MPI_CHAR, all, NAME_LEN, MPI_CHAR, MPI_COMM_WORLD);

    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int node_size, node_rank;
    MPI_Comm_size(node, &node_size);
    MPI_Comm_rank(node, &node_rank);

    /* The ranks of my node communicator must be exactly those with my host name. */
    int same = 0;
    for (int r = 0; r < size; r++)
        same += strcmp(all + (size_t)r * NAME_LEN, name) == 0;
    int *members = malloc(sizeof(int) * (size_t)node_size);
    MPI_Allgather(&rank, 1, MPI_INT, members, 1, MPI_INT, node);
    int bad = same != node_size;
    for (int i = 0; i < node_size; i++)
        bad |= strcmp(all + (size_t)members[i] * NAME_LEN, name) != 0;

    /* Count distinct host names (node leaders) and move data around the ring. */
    int leader = node_rank == 0, nodes = 0;
    MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int token = rank * 7 + 1, got = -1;
    MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % size, 0, &got, 1, MPI_INT, (rank + size - 1) % size, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    bad |= got != ((rank + size - 1) % size) * 7 + 1;
    if (expect_nodes > 0)
        bad |= nodes != expect_nodes;
    if (bad)
        fprintf(stderr, "split_type: rank %d on %s: node communicator of %d ranks, %d ranks named %s, %d nodes "
                "(expected %d), ring token %d\n", rank, name, node_size, same, name, nodes, expect_nodes, got);
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (rank == 0 && !any_bad)
        printf("split_type OK: %d ranks on %d nodes\n", size, nodes);
    free(members);
    free(all);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return any_bad ? 1 : 0;
}
