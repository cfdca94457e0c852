function set_random_seed(random_seed)
% caffe.set_random_seed(seed): seeds Caffe's random generator (weight
% fillers, dropout, shuffling); a solver's own random_seed overrides it.

if nargin ~= 1
  error('caffe:usage', 'usage: caffe.set_random_seed(random_seed)');
end
caffe.caffe_('set_random_seed', random_seed);
end
