/* The reference: MPI_Allreduce (sum, float) of `count` elements in a loop, from C.
 * Prints one JSON line on rank 0: the median over `repeats` of the mean time per call.
 *   mpicc -O2 -o allreduce_mpi allreduce_mpi.c && mpirun -np 2 ./allreduce_mpi COUNT [ITERS] [REPEATS]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long count = argc > 1 ? atol(argv[1]) : 477610;
  int iters = argc > 2 ? atoi(argv[2]) : 200;
  int repeats = argc > 3 ? atoi(argv[3]) : 9;
  float* in = malloc(sizeof(float) * count);
  float* out = malloc(sizeof(float) * count);
  for (long i = 0; i < count; ++i) in[i] = (float)(i % 97) + rank;
  for (int i = 0; i < 20; ++i) MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double* t = malloc(sizeof(double) * repeats);
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i)
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t[r] = (MPI_Wtime() - t0) / iters;
  }
  qsort(t, repeats, sizeof(double), cmp);
  if (rank == 0) printf("{\"count\": %ld, \"ranks\": %d, \"seconds\": %.9f}\n", count, size, t[repeats / 2]);
  free(in);
  free(out);
  free(t);
  MPI_Finalize();
  return 0;
}
