function counts = reset_all()
% caffe.reset_all()
%   Frees every Solver and Net made so far and invalidates every caffe.Net,
%   caffe.Solver, caffe.Layer and caffe.Blob object that refers to them:
%   using one afterwards is an error (caffe:invalidHandle) saying so.
%   counts = caffe.reset_all() returns struct('solvers', S, 'nets', N), the
%   numbers of solvers and stand-alone nets that were still alive, instead
%   of printing them.

c = caffe.caffe_('reset');
if nargout > 0
  counts = struct('solvers', c(1), 'nets', c(2));
else
  fprintf('Cleared %d solvers and %d stand-alone nets\n', c(1), c(2));
end
end
