function test_train_lenet()
% Trains LeNet (models/lenet) on the first 640 Fashion-MNIST images from
% Octave: the loss falls, the test net (sharing the weights) classifies
% well above chance, step(1) x N, solve() and poseidon_train give the same
% weights bit for bit, and snapshot/restore resume at the same point.

iters = 40;
s = caffe.test.lenet_setup(640, 200);
cleanup = onCleanup(@() caffe.test.remove_dir(s.dir));

solver = caffe.Solver(s.solver('step', iters));
assert(solver.iter() == 0 && solver.max_iter() == iters);
assert(strcmp(solver.type, 'SGD'));
assert(numel(solver.test_nets) == 1, 'one test net');
assert(isequal(solver.net.outputs, {'loss'}));
assert(isequal(sort(solver.test_nets(1).outputs), {'accuracy'; 'loss'}));
assert(isequal(solver.net.blobs('data').shape(), [28 28 1 64]));

losses = zeros(iters, 1);
for i = 1:iters
  solver.step(1);
  losses(i) = solver.net.blobs('loss').get_data();
end
assert(solver.iter() == iters);
first = mean(losses(1:5));
last = mean(losses(end - 4:end));
fprintf('    loss %.3f (first 5 iterations) -> %.3f (last 5)\n', first, last);
assert(first > 1.8, 'an untrained LeNet starts near ln(10) = 2.3, got %g', first);
assert(last < 0.7 * first, 'loss did not fall: %g -> %g', first, last);

% The test net shares the trained weights.
assert(isequal(solver.test_nets(1).params('fc2', 1).get_data(), ...
               solver.net.params('fc2', 1).get_data()));
accuracy = 0;
for i = 1:2
  solver.test_nets(1).forward_prefilled();
  accuracy = accuracy + solver.test_nets(1).blobs('accuracy').get_data() / 2;
end
fprintf('    test accuracy on 200 images: %.3f\n', accuracy);
assert(accuracy > 0.4, 'accuracy %g is near chance (0.1)', accuracy);

state = solver.snapshot();
assert(strcmp(state, fullfile(s.dir, sprintf('step_iter_%d.solverstate', iters))));
assert(exist(strrep(state, '.solverstate', '.caffemodel'), 'file') == 2);

% solve() and the C++ tool follow the same trajectory.
solved = caffe.Solver(s.solver('solve', iters));
solved.solve();
assert(solved.iter() == iters);
caffe.test.run_tool('poseidon_train', 'train', ...
                    ['--solver=' s.solver('cpp', iters)]);
suffix = sprintf('_iter_%d.caffemodel', iters);
a = caffe.Net(s.model, fullfile(s.dir, ['step' suffix]), 'test');
b = caffe.Net(s.model, fullfile(s.dir, ['solve' suffix]), 'test');
c = caffe.Net(s.model, fullfile(s.dir, ['cpp' suffix]), 'test');
layers = {'conv1', 'conv2', 'fc1', 'fc2'};
for l = 1:numel(layers)
  for i = 1:2
    wa = a.params(layers{l}, i).get_data();
    assert(isequal(wa, b.params(layers{l}, i).get_data()), ...
           'step(1) x %d and solve() differ in %s{%d}', iters, layers{l}, i);
    assert(isequal(wa, c.params(layers{l}, i).get_data()), ...
           'Octave and poseidon_train differ in %s{%d}', layers{l}, i);
    assert(isequal(wa, solver.net.params(layers{l}, i).get_data()));
  end
end

% restore() resumes: iteration count and weights come back.
resumed = caffe.Solver(s.solver('resumed', 2 * iters));
resumed.restore(state);
assert(resumed.iter() == iters);
assert(isequal(resumed.net.params('conv1', 1).get_data(), ...
               solver.net.params('conv1', 1).get_data()));
resumed.step(2);
assert(resumed.iter() == iters + 2);
end
