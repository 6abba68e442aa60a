#include <omp.h>
#include <stdio.h>
#include <stdatomic.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
_Alignas(64) static atomic_int count; _Alignas(64) static atomic_int gen;
static void bar(int n){ int g=atomic_load_explicit(&gen,memory_order_relaxed); if(atomic_fetch_add_explicit(&count,1,memory_order_acq_rel)==n-1){atomic_store_explicit(&count,0,memory_order_relaxed);atomic_store_explicit(&gen,g+1,memory_order_release);} else while(atomic_load_explicit(&gen,memory_order_acquire)==g) __builtin_ia32_pause(); }
volatile int sink;
int main(){ for(int r=0;r<3;r++){ double t=now();
  #pragma omp parallel
  { int n=omp_get_num_threads(); for(int i=0;i<100000;i++){ sink=i; bar(n);} }
  printf("custom barrier %.2f us\n",(now()-t)/100000*1e6);} }
