#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
/* hn LIB ENTRY n0 n1 ... : calls the trampoline kiln_eN(void**) */
int main(int argc,char**argv){
  void*h=dlopen(argv[1],RTLD_NOW); if(!h){puts(dlerror());return 1;}
  void (*f)(void*const*)=(void(*)(void*const*))dlsym(h,argv[2]); if(!f){printf("no %s\n",argv[2]);return 1;}
  int nb=argc-3; void*b[16];
  for(int i=0;i<nb;i++){long n=atol(argv[3+i]); float*p=malloc(n*4); for(long j=0;j<n;j++)p[j]=(float)((j*37+i*11)%23-11)/16.f; b[i]=p;}
  for(int i=0;i<10;i++) f(b);
  double best=1e9; for(int r=0;r<100;r++){double t=now(); f(b); t=now()-t; if(t<best)best=t;}
  long n=atol(argv[argc-1]); double s=0; float*o=b[nb-1]; for(long j=0;j<n;j++) s+=o[j];
  printf("%s %.1f us (%.6g)\n",argv[2],best*1e6,s);
}
