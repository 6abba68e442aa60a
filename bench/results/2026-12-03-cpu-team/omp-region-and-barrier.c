#include <omp.h>
#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
volatile int sink;
int main(){ 
  for (int r=0;r<3;r++){
  double t=now(); for(int i=0;i<20000;i++){
    #pragma omp parallel
    { sink = omp_get_thread_num(); }
  } printf("empty parallel region %.2f us\n",(now()-t)/20000*1e6);
  t=now();
  #pragma omp parallel
  { for(int i=0;i<20000;i++){
    #pragma omp for schedule(static)
    for (int j=0;j<2;j++) sink=j;
  } }
  printf("omp for + barrier inside one region %.2f us\n",(now()-t)/20000*1e6);
  }
}
