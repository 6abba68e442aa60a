#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <omp.h>
void kiln_k0(const float *restrict b0, const float *restrict b1, const float *restrict b2, float *restrict b3, const float *restrict kiln_pk, int kiln_tid, int kiln_nt);
void kiln_p0(void *const *a, int kiln_tid, int kiln_nt);
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  int nt = atoi(argv[1]); long n = 512L*512*9*2;
  float *b0 = aligned_alloc(64, 4*n), *b1 = aligned_alloc(64, 4*n), *b2 = aligned_alloc(64, 4*n), *b3 = aligned_alloc(64, 4*n), *pk = aligned_alloc(64, 4*n);
  for (long i=0;i<n;i++) { b0[i]=(i%13)*0.01f; b1[i]=(i%7)*0.1f; b2[i]=(i%5)*0.1f; }
  void *a[5] = {b0,b1,b2,b3,pk};
  #pragma omp parallel num_threads(nt)
  kiln_p0(a, omp_get_thread_num(), nt);
  for (int rep=0;rep<5;rep++){ double best=1e9;
    for (int it=0;it<30;it++){ double t=now();
      #pragma omp parallel num_threads(nt)
      kiln_k0(b0,b1,b2,b3,pk,omp_get_thread_num(),nt);
      t=now()-t; if(t<best)best=t; }
    printf("%d threads: %.0f us\n", nt, best*1e6); }
}
