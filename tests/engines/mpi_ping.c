// SPDX-License-Identifier: MIT
/*
 * An MPI program for tests/engines/mpi_run.sh: ranks 0 and 1 exchange
 * messages of 8 B to 1 MiB (eager and rendezvous protocols), each filled
 * with a pattern that the receiver checks byte by byte, then all ranks
 * take part in an allreduce. Exit 0 only if every byte and the sum are
 * right.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LEN (1 << 20)

static unsigned char pattern(int round, size_t i)
{
	return (unsigned char)(round * 31 + i * 7 + 1);
}

static int check(const unsigned char *buf, size_t len, int round)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(round, i))
			return 1;
	return 0;
}

static void fill(unsigned char *buf, size_t len, int round)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(round, i);
}

static int exchange(int rank, unsigned char *buf)
{
	int bad = 0, round = 0;

	for (size_t len = 8; len <= MAX_LEN; len *= 4) {
		for (int rep = 0; rep < 10; rep++, round++) {
			if (rank == 0) {
				fill(buf, len, round);
				MPI_Send(buf, (int)len, MPI_BYTE, 1, round,
					 MPI_COMM_WORLD);
				memset(buf, 0, len);
				MPI_Recv(buf, (int)len, MPI_BYTE, 1, round,
					 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				bad += check(buf, len, round + 1000);
			} else if (rank == 1) {
				memset(buf, 0, len);
				MPI_Recv(buf, (int)len, MPI_BYTE, 0, round,
					 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				bad += check(buf, len, round);
				fill(buf, len, round + 1000);
				MPI_Send(buf, (int)len, MPI_BYTE, 0, round,
					 MPI_COMM_WORLD);
			}
		}
	}
	return bad;
}

int main(int argc, char **argv)
{
	int rank, size, bad, sum = 0, one;
	unsigned char *buf = malloc(MAX_LEN);

	if (!buf)
		return 1;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	bad = size >= 2 ? exchange(rank, buf) : 1;
	one = rank + 1;
	MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (sum != size * (size + 1) / 2)
		bad++;
	printf("mpi_ping: rank %d of %d: %s (sum %d)\n", rank, size,
	       bad ? "WRONG DATA" : "data ok", sum);
	MPI_Finalize();
	free(buf);
	return bad ? 1 : 0;
}
