#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
_Alignas(64) atomic_int flag;
enum { N = 200000 };
static void *other(void *a){ (void)a; for(int i=0;i<N;i++){ while(atomic_load_explicit(&flag,memory_order_acquire)!=2*i+1); atomic_store_explicit(&flag,2*i+2,memory_order_release);} return 0; }
int main(){ pthread_t t; pthread_create(&t,0,other,0); double s=now();
 for(int i=0;i<N;i++){ atomic_store_explicit(&flag,2*i+1,memory_order_release); while(atomic_load_explicit(&flag,memory_order_acquire)!=2*i+2); }
 printf("round trip %.0f ns\n",(now()-s)/N*1e9); pthread_join(t,0); }
