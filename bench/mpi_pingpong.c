// SPDX-License-Identifier: MIT
/*
 * MPI ping-pong for docs/BENCHMARKS.md (engines): two ranks.
 *   mpi_pingpong
 * Prints "lat_us X": half the median round trip of 8 B messages (20,000
 * iterations after 2,000 warm-up), and "bw_MBps Y": 1 MiB messages, 64 in
 * flight (Isend/Irecv windows), 20 windows, rank 0 to rank 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define ITERS 20000
#define WARM 2000
#define BIG (1 << 20)
#define WIN 64
#define WINDOWS 20

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double latency(int rank)
{
	static double rt[ITERS];
	char b[8] = { 0 };

	for (int i = 0; i < ITERS + WARM; i++) {
		double t0 = MPI_Wtime();

		if (rank == 0) {
			MPI_Send(b, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
			MPI_Recv(b, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(b, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			MPI_Send(b, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
		}
		if (i >= WARM)
			rt[i - WARM] = MPI_Wtime() - t0;
	}
	qsort(rt, ITERS, sizeof(rt[0]), cmp);
	return rt[ITERS / 2] / 2 * 1e6;
}

static double bandwidth(int rank, char *buf)
{
	MPI_Request req[WIN];
	double t0;

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int w = 0; w < WINDOWS; w++) {
		for (int i = 0; i < WIN; i++) {
			if (rank == 0)
				MPI_Isend(buf + (size_t)i * BIG, BIG, MPI_BYTE,
					  1, i, MPI_COMM_WORLD, &req[i]);
			else
				MPI_Irecv(buf + (size_t)i * BIG, BIG, MPI_BYTE,
					  0, i, MPI_COMM_WORLD, &req[i]);
		}
		MPI_Waitall(WIN, req, MPI_STATUSES_IGNORE);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	return (double)BIG * WIN * WINDOWS / (MPI_Wtime() - t0) / 1e6;
}

int main(int argc, char **argv)
{
	char *buf = calloc(WIN, BIG);
	double lat, bw;
	int rank;

	if (!buf)
		return 1;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	lat = latency(rank);
	bw = bandwidth(rank, buf);
	if (rank == 0)
		printf("lat_us %.3f\nbw_MBps %.0f\n", lat, bw);
	MPI_Finalize();
	free(buf);
	return 0;
}
